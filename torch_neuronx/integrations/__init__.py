"""Adapters at the seams where Hugging Face libraries (and a few torch tables) do not know the neuron device yet, plus offline
tiny models (`tiny_models`) for examples, tests and the compatibility sweep.

`install()` is called once when the neuron device registers (at `import torch`). It imports nothing: each
adapter runs right after its library is imported (`_post_import.when_imported`), whatever the import order
(also when that library is the one importing torch, e.g. `import accelerate` as a script's first line), and
only changes behaviour when the model or the accelerator is neuron.
Each wraps the library's function once (`torch_neuronx._wrap.wrap_once`), keeping its name and docstring.

| adapter | library seam | why |
|---|---|---|
| `accelerate_memory` | `accelerate.utils.modeling.get_max_memory` | `device_map="auto"` must see the NeuronCores |
| `generation_compile` | `GenerationMixin._valid_auto_compile_criteria` | say why the decode step is not compiled |
| `trainer_rng` | `Trainer._save_rng_state` / `_load_rng_state` | checkpoints save and resume the neuron RNG state |
| `linear_cross_entropy` | torch's `LinearCrossEntropyOptions` device table | bf16/fp16 accumulate in fp32 as on CPU |
| `safetensors_load` | `safetensors.torch.load_file` | `device="neuron:N"` (accelerate `load_state`) loads |
| `accelerate_fp16` | `Accelerator.__init__` (+ `AcceleratorState.mixed_precision` while it runs) | `mixed_precision="fp16"` autocasts and scales on neuron as on CUDA |
| `trl_device_map` | `trl.trainer.utils.create_model_from_path` | TRL's default device_map: one core per process (MULTI_NEURON like MULTI_GPU; one process: the current core when the model fits) |
| `accelerate_state` | `PartialState.__init__` | a launched rank with misconfigured cores stops instead of training alone on CPU |
| `context_parallel` | torch's context-parallel op handlers and `context_parallel` | ring attention for the CPU flash op neuron's SDPA runs; a mesh on the wrong device is refused |

Public (``__all__``): ``install()`` (called at registration) and the module ``tiny_models``
(``build_tiny_model``: offline tiny models for examples and tests). The adapters above and
``_post_import`` are internal: each patches its library when that library is imported.
"""
from __future__ import annotations

import importlib

__all__ = ["install", "tiny_models"]

# module whose import triggers the adapter -> the adapter module here (each has `patch(module)`)
_ADAPTERS = {
    "accelerate.utils.modeling": "accelerate_memory",
    "transformers.generation.utils": "generation_compile",
    "transformers.trainer": "trainer_rng",
    "safetensors.torch": "safetensors_load",
    "accelerate.state": "accelerate_state",
    "accelerate.accelerator": "accelerate_fp16",
    "trl.trainer.utils": "trl_device_map",
    "torch.nn.modules.linear_cross_entropy_options": "linear_cross_entropy",
    "torch.distributed.tensor.experimental._context_parallel._attention": "context_parallel",
}
_installed = False


def _adapter(name: str):
    def hook(module) -> None:
        importlib.import_module(f"{__name__}.{name}").patch(module)

    return hook


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    from ..distributed import hooks
    from . import _post_import

    hooks.set_import_watcher(_post_import.when_imported)  # the distributed layer's adapters of torch modules
    for target, adapter in _ADAPTERS.items():
        _post_import.when_imported(target, _adapter(adapter))
