"""Quickstart: the neuron device after a plain `import torch`.

Runs on any Linux machine: the virtual NeuronCore runtime stands in for
Trainium hardware (see docs/virtual-runtime.md).
"""
import torch
import torch.nn as nn

print(f"neuron available: {torch.neuron.is_available()}, cores: {torch.neuron.device_count()}, "
      f"accelerator: {torch.accelerator.current_accelerator()}")
props = torch.neuron.get_device_properties(0)
print(f"neuron:0 is a logical core of a {props.name} chip with {props.total_memory / 2**30:.0f} GiB HBM")

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 1))
reference = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 1))
reference.load_state_dict(model.state_dict())
model.to("neuron")
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-2)

x, y = torch.randn(64, 16), torch.randn(64, 1)
for step in range(5):
    loss = nn.functional.mse_loss(model(x.to("neuron")), y.to("neuron"))
    opt.zero_grad()
    loss.backward()
    opt.step()
    ref_loss = nn.functional.mse_loss(reference(x), y)
    ref_opt.zero_grad()
    ref_loss.backward()
    ref_opt.step()
    print(f"step {step}: neuron loss {loss.item():.6f}  cpu loss {ref_loss.item():.6f}")

assert torch.equal(model[0].weight.cpu(), reference[0].weight), "neuron and CPU diverged"
with torch.autocast("neuron", dtype=torch.bfloat16):
    out = model(x.to("neuron"))
print(f"autocast output dtype: {out.dtype}; memory allocated on neuron:0: "
      f"{torch.neuron.memory_allocated(0)} bytes")
print("quickstart OK: neuron matches CPU bit for bit")
