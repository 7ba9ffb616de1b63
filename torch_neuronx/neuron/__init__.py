"""torch.neuron: the device module of the neuron device, modelled on torch.cuda."""
from __future__ import annotations

from . import amp, memory, random, streams
from .amp import get_amp_supported_dtype, is_bf16_supported, is_fp16_supported
from .device import (
    NeuronDeviceProperties,
    _is_in_bad_fork,
    _lazy_init,
    current_device,
    device,
    device_count,
    device_of,
    get_device_capability,
    get_device_name,
    get_device_properties,
    init,
    is_available,
    is_initialized,
    set_device,
    synchronize,
)
from .memory import (
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_peak_memory_stats,
)
from .random import (
    _get_generator,
    default_generators,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from .streams import Event, Stream, StreamContext, current_stream, default_stream, set_stream, stream


def __getattr__(name: str):
    # `_initialized` is read by torch.utils.checkpoint as a module attribute.
    if name == "_initialized":
        return is_initialized()
    if name in _INDUCTOR_HOOKS:
        return _inductor_codegen(name)
    raise AttributeError(f"module 'torch.neuron' has no attribute {name!r}")


# Inductor asks the PrivateUse1 device module for these when it first meets a neuron graph without a
# registered backend: a plain `torch.compile` (backend "inductor") before any backend="neuron" compile,
# as TorchTitan's compiled `create_block_mask` is. Answering registers neuron with Dynamo and Inductor in
# full, through the function the compiler's installation set here (the device layer cannot import the
# compiler above it; torch_neuronx/_registration.py sets torch_neuronx.compiler.register). There is no
# C++-wrapper codegen for neuron, so `CppWrapperCodegen` stays absent and Inductor keeps the
# registration made here rather than replacing it.
_INDUCTOR_HOOKS = ("Scheduling", "PythonWrapperCodegen")
_inductor_registration: list = []   # [register]: set once by the compiler's installation


def _set_inductor_registration(register) -> None:
    """Hook: `register()` registers neuron with Dynamo and Inductor (called when Inductor asks first)."""
    if not callable(register):
        raise TypeError(f"_set_inductor_registration(register={register!r}): register must be callable")
    _inductor_registration[:] = [register]


def _inductor_codegen(name: str):
    from torch._inductor.codegen.common import get_scheduling_for_device, get_wrapper_codegen_for_device

    if not _inductor_registration:
        raise AttributeError(f"torch.neuron.{name}: the neuron compiler is not installed (torch_neuronx's "
                             "registration sets it; import torch_neuronx first)")
    _inductor_registration[0]()
    return get_scheduling_for_device("neuron") if name == "Scheduling" else get_wrapper_codegen_for_device("neuron")
