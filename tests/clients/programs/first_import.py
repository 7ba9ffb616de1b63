"""A training script whose first statement is a library import, as users write them.

    python first_import.py "import accelerate"            # or "from trl import SFTTrainer", ...

The statement runs before anything else has imported torch, so torch (and with it torch_neuronx's
autoload) is imported from inside that library's own import. Then the script reports, as `RESULT {json}`:
* `wrapped`: for each torch_neuronx adapter whose library module is now imported, whether its seams are
  our wrappers (`torch_neuronx._wrap.is_wrapped`);
* with `--train`: the accelerate idiom (optimizer built on the CPU model, then `prepare` moves the model)
  on neuron and on CPU: whether prepare kept the Parameter objects, and the weights after 3 AdamW steps,
  which were unchanged on neuron before the fix ("training silently does nothing").
"""
import sys

exec(sys.argv[1])  # noqa: S102 - the script's first statement: nothing has imported torch yet

import json  # noqa: E402
import operator  # noqa: E402

import torch  # noqa: E402

from torch_neuronx import integrations  # noqa: E402
from torch_neuronx._wrap import is_wrapped  # noqa: E402

# the functions each adapter wraps, by the module that triggers it
SEAMS = {
    "accelerate.utils.modeling": ["get_max_memory"],
    "accelerate.state": ["PartialState.__init__"],
    "accelerate.accelerator": ["Accelerator.__init__"],
    "transformers.generation.utils": ["GenerationMixin._valid_auto_compile_criteria"],
    "transformers.trainer": ["Trainer._save_rng_state", "Trainer._load_rng_state"],
    "safetensors.torch": ["load_file"],
    "trl.trainer.utils": ["create_model_from_path"],
    "torch.nn.modules.linear_cross_entropy_options": ["LinearCrossEntropyOptions._resolve_auto_acc_dtype"],
    "torch.distributed.tensor.experimental._context_parallel._attention": [
        "_enable_cp_dtensor_dispatcher", "_disable_cp_dtensor_dispatcher", "context_parallel"],
}


def wrapped() -> dict:
    missing = set(integrations._ADAPTERS) - set(SEAMS)
    assert not missing, f"add the seams of {missing} to SEAMS"
    return {f"{name}.{seam}": is_wrapped(operator.attrgetter(seam)(sys.modules[name]))
            for name, seams in SEAMS.items() if name in sys.modules for seam in seams}


def train(cpu: bool) -> dict:
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(True)
    accelerator = Accelerator(cpu=cpu)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
    before = list(model.parameters())
    initial = [p.detach().flatten().tolist() for p in before]
    model, optimizer = accelerator.prepare(model, optimizer)
    x = torch.arange(12.0).reshape(3, 4).to(accelerator.device)
    for _ in range(3):
        accelerator.backward(model(x).pow(2).mean())
        optimizer.step()
        optimizer.zero_grad()
    return {"device": str(accelerator.device), "initial": initial,
            "same_parameters": all(a is b for a, b in zip(before, model.parameters())),
            "weights": [p.detach().cpu().flatten().tolist() for p in model.parameters()]}


result = {"wrapped": wrapped()}
if "--train" in sys.argv:
    result["neuron"], result["cpu"] = train(cpu=False), train(cpu=True)
print("RESULT " + json.dumps(result), flush=True)
