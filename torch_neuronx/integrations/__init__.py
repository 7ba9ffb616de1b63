"""Adapters at the seams where Hugging Face libraries do not know the neuron device yet, plus offline
tiny models (`tiny_models`) for examples, tests and the compatibility sweep.

`install()` is called once when the neuron device registers (at `import torch`). It imports nothing: each
adapter runs right after its library is imported (`_post_import.when_imported`), and only changes
behaviour when the model or the accelerator is neuron.

| adapter | library seam | why |
|---|---|---|
| `accelerate_memory` | `accelerate.utils.modeling.get_max_memory` | `device_map="auto"` must see the NeuronCores |
| `generation_compile` | `GenerationMixin._valid_auto_compile_criteria` | say why the decode step is not compiled |
| `trainer_rng` | `Trainer._save_rng_state` / `_load_rng_state` | checkpoints save and resume the neuron RNG state |
"""
from __future__ import annotations

_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    from . import _post_import

    def _accelerate(module):
        from . import accelerate_memory

        accelerate_memory.patch(module)

    def _generation(module):
        from . import generation_compile

        generation_compile.patch(module)

    def _trainer(module):
        from . import trainer_rng

        trainer_rng.patch(module)

    _post_import.when_imported("accelerate.utils.modeling", _accelerate)
    _post_import.when_imported("transformers.generation.utils", _generation)
    _post_import.when_imported("transformers.trainer", _trainer)
