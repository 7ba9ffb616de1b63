"""TRL's default `device_map` on a multi-core neuron instance: one core per process, as on one GPU per process.

`trl.trainer.utils.create_model_from_path` (which every TRL trainer, and so `python -m trl.scripts.sft` and
`trl sft`, uses to load `model=<path>`) defaults to `device_map="auto"` on any accelerator but cpu/mps. Each
trainer first forces `device_map=None` when `distributed_type in ["MULTI_GPU", "DEEPSPEED"]` ("Distributed
training requires device_map=None"), a list without MULTI_NEURON. So on an instance with 4 NeuronCores:
* under `trl sft` / `accelerate launch` (MULTI_NEURON), every rank spread its model over all 4 cores;
* in one process, "auto" (balanced) spread even a tiny model over the 4 cores, and TRL's fused LM-head loss
  (log-probs on the head's core) then met the Trainer's token count on `args.device`: "Expected all tensors
  to be on the same device ... neuron:2 and neuron:0".

This adapter fills in what TRL leaves to the default, when the process's device is neuron:
* a MULTI_NEURON run gets `device_map=None`, like MULTI_GPU (the Trainer then puts the model on
  `neuron:LOCAL_RANK`);
* a single process whose model fits in the current core's free memory gets that core (`device_map=
  "neuron:N"`), what "auto" gives on a one-GPU machine; a larger model keeps "auto" and spreads over cores.
An explicit `device_map` (e.g. the SFT example's `device_map: None` in `model_init_kwargs`) is left alone, except
that MULTI_NEURON overrides it to None exactly where TRL overrides it for MULTI_GPU.
"""
from __future__ import annotations

import logging

from .._wrap import wrap_once

logger = logging.getLogger(__name__)


def _model_bytes(model_id: str, kwargs: dict) -> int:
    """Size of the model's weights in the dtype it will load in, from its config on the meta device."""
    import torch
    from accelerate import init_empty_weights
    from accelerate.utils import compute_module_sizes
    from transformers import AutoConfig, AutoModelForCausalLM

    trust = kwargs.get("trust_remote_code", False)
    config = AutoConfig.from_pretrained(model_id, trust_remote_code=trust, revision=kwargs.get("revision"))
    with init_empty_weights():
        model = AutoModelForCausalLM.from_config(config, trust_remote_code=trust)
    dtype = kwargs.get("dtype", "float32")
    dtype = getattr(torch, dtype) if isinstance(dtype, str) and dtype != "auto" else dtype
    return compute_module_sizes(model, dtype=dtype if isinstance(dtype, torch.dtype) else None)[""]


def default_device_map(model_id: str, kwargs: dict):
    """The device_map TRL should use here, or `...` to keep TRL's own choice."""
    import torch
    from accelerate import PartialState
    from accelerate.utils import DistributedType

    state = PartialState()
    if state.device.type != "neuron":
        return ...
    if state.distributed_type == DistributedType.MULTI_NEURON:
        return None
    if "device_map" in kwargs or kwargs.get("quantization_config") is not None:
        return ...
    core = torch.neuron.current_device()
    try:
        size = _model_bytes(model_id, kwargs)
    except Exception as exc:  # an architecture we cannot build on meta: keep TRL's "auto"
        logger.info("torch_neuronx: keeping device_map='auto' for %s (size unknown: %s)", model_id, exc)
        return ...
    free = torch.neuron.mem_get_info(core)[0]
    if size <= free:
        return f"neuron:{core}"
    logger.info("torch_neuronx: %s needs %d bytes, more than neuron:%d has free (%d): device_map='auto' spreads "
                "it over the NeuronCores", model_id, size, core, free)
    return ...


def patch(module) -> None:
    """Wrap `trl.trainer.utils.create_model_from_path` (before the trainers import it by name)."""
    def make(original):
        def create_model_from_path(model_id, architecture=None, **kwargs):
            device_map = default_device_map(model_id, kwargs)
            if device_map is not ...:
                kwargs["device_map"] = device_map
            return original(model_id, architecture, **kwargs)

        return create_model_from_path

    wrap_once(module, "create_model_from_path", make)
