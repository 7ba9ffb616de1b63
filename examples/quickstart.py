"""Quickstart: train on the neuron device, see its estimated Trainium time, plan a full-size model.

Runs on any Linux machine: the virtual NeuronCore runtime stands in for Trainium
hardware (docs/virtual-runtime.md). Three parts:
1. a small transformer trains on `neuron` after a plain `import torch`, step for
   step equal to the same model on CPU;
2. the estimated trn2 time of one training step (torch_neuronx.estimate,
   docs/estimate.md) next to this host's measured time for it;
3. a dry run of Qwen3-8B training at full size on a trn2.48xlarge
   (`python -m torch_neuronx.plan train`, docs/plan.md): does it fit, HBM per
   core, step time.

`--no-plan` skips part 3 (about a minute and a half of the two minutes).
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import torch
import torch.nn as nn

import torch_neuronx

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 6


def header(text: str) -> None:
    print(f"\n== {text}")


class TinyLM(nn.Module):
    """A two-layer decoder-style transformer (no dropout, so neuron and CPU runs are comparable)."""

    def __init__(self, vocab=512, d=256, heads=4, layers=2, seq=128):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

    def forward(self, tokens):
        h = self.embed(tokens) + self.pos[: tokens.shape[1]]
        h = self.blocks(h, mask=self.mask, is_causal=True)
        return self.head(h)


def train_step(model, opt, tokens):
    logits = model(tokens[:, :-1])
    loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def part1_train():
    header("1. train on neuron")
    props = torch.neuron.get_device_properties(0)
    print(f"torch-neuronx {torch_neuronx.__version__}: {torch.neuron.device_count()} NeuronCores, "
          f"neuron:0 is a logical core of a {props.name} chip with {props.total_memory / 2**30:.0f} GiB HBM")
    torch.manual_seed(0)
    model = TinyLM(seq=64)
    reference = TinyLM(seq=64)
    reference.load_state_dict(model.state_dict())
    model.to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-3)
    data = torch.randint(0, 512, (STEPS, 8, 65))
    host_s = []
    for step in range(STEPS):
        start = time.perf_counter()
        loss = train_step(model, opt, data[step].to("neuron"))
        torch.neuron.synchronize()
        host_s.append(time.perf_counter() - start)
        ref_loss = train_step(reference, ref_opt, data[step])
        print(f"step {step}: neuron loss {loss.item():.6f}  cpu loss {ref_loss.item():.6f}")
        assert torch.equal(loss.cpu(), ref_loss), "neuron and CPU diverged"
    print(f"neuron equals CPU bit for bit; {torch.neuron.memory_allocated() / 2**20:.1f} MiB allocated on neuron:0")
    return model, opt, data, host_s


def part2_estimate(model, opt, data, host_s):
    header("2. estimated trn2 time per step")
    with warnings.catch_warnings():
        # AdamW's foreach ops have no formula of their own: counted as Vector-engine work (docs/estimate.md)
        warnings.filterwarnings("ignore", message="torch_neuronx.estimate: no cost model")
        with torch_neuronx.estimate("trn2.48xlarge") as est:
            train_step(model, opt, data[0].to("neuron"))
    host = sorted(host_s[1:])[len(host_s[1:]) // 2]  # median after the first (warm-up) step
    print(f"one training step (8 x 64 tokens, {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters):")
    print(f"  estimated on trn2 (one logical NeuronCore, eager): {est.total_s * 1e3:8.3f} ms")
    print(f"  measured on this host (virtual NeuronCore):        {host * 1e3:8.3f} ms")
    top = sorted(est.by_category().items(), key=lambda kv: -kv[1])[:3]
    print("  where the estimated time goes: " + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in top))


def part3_plan():
    header("3. plan Qwen3-8B training at full size on a trn2.48xlarge (dry run, nothing allocated)")
    args = ["--config", os.path.join(HERE, "configs", "qwen3-8b"), "--instance", "trn2.48xlarge",
            "--fsdp", "32", "--dp", "2", "--micro-batch", "1", "--seq-len", "2048"]
    print("python -m torch_neuronx.plan train " + " ".join(args[:1] + ["examples/configs/qwen3-8b"] + args[2:]))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "plan.json")
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "train", *args, "--json", out],
                              capture_output=True, text=True)
        if done.returncode not in (0, 1):  # 1: planned, does not fit
            sys.exit(f"plan failed ({done.returncode}):\n{done.stderr[-3000:]}")
        with open(out) as f:
            report = json.load(f)
    gib = 2**30
    print(f"  {report['parameters'] / 1e9:.2f} B parameters; layout {report['layout']}; micro-batch 1 x 2048 "
          f"tokens, {report['dtype']}, AdamW")
    print(f"  fits: {'yes' if report['fits'] else 'NO'}; peak HBM per core "
          f"{report['peak_hbm_bytes_per_core'] / gib:.2f} GiB of {report['hbm_capacity_bytes_per_core'] / gib:.0f} GiB")
    if report["step_time_s"] is not None:
        print(f"  estimated step time on trn2: {report['step_time_s']:.2f} s, {report['tokens_per_s']:,.0f} "
              f"tokens/s, MFU {report['mfu'] * 100:.0f}%")
        if report.get("step_time_s_range"):   # from the calibration table (docs/calibration.md)
            low, high = report["step_time_s_range"]
            basis = report["ranges"]["train"]
            print(f"  80% range of the step time: {low:.2f} to {high:.2f} s ({basis['kind']}: "
                  f"{len(basis['rows'])} published rows{', few: a wide range' if basis['pooled'] else ''})")
    else:
        print(f"  out of memory: {report['oom']}")
    print(f"  (planned in {time.perf_counter() - start:.0f} s on this host)")


if __name__ == "__main__":
    model, opt, data, host_s = part1_train()
    part2_estimate(model, opt, data, host_s)
    if "--no-plan" not in sys.argv[1:]:
        part3_plan()
    print("\nquickstart OK")
