"""Teach torch's RNG-functionalisation higher-order ops the neuron device.

Activation checkpointing inside a compiled graph wraps the recomputed region in
`run_and_save_rng_state` / `run_with_rng_state`, which know only cuda, cpu, hpu
and xpu. On neuron the state is the device generator's 16-byte (seed, offset),
read and restored through torch.neuron like CUDA's through torch.cuda.
"""
from __future__ import annotations

import torch

from .._torch_versions import require

DEVICE = "neuron"
# The torch minors whose torch._prims.rng_prims higher-order ops these registrations were checked against.
WRITTEN_FOR = ("2.13", "2.14", "2.15")


def _save_state(op, *args, **kwargs):
    return torch.neuron.get_rng_state(), op(*args, **kwargs)


def _run_with_state(rng_state, op, *args, **kwargs):
    current = torch.neuron.get_rng_state()
    torch.neuron.set_rng_state(rng_state.cpu())
    try:
        return op(*args, **kwargs)
    finally:
        torch.neuron.set_rng_state(current)


def register() -> None:
    require("torch_neuronx.compiler._rng_hops.register (kernels of torch._prims.rng_prims' RNG ops)", WRITTEN_FOR)
    from torch._C import DispatchKey
    from torch._higher_order_ops.utils import registered_hop_fake_fns
    from torch._prims import rng_prims
    from torch._prims.rng_prims import run_and_save_rng_state, run_with_rng_state
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    def on_neuron(args, kwargs) -> bool:
        return rng_prims.get_device(args, kwargs) == DEVICE

    run_and_save_rng_state.py_impl(DispatchKey.PrivateUse1)(_save_state)
    run_with_rng_state.py_impl(DispatchKey.PrivateUse1)(_run_with_state)

    original_fake = registered_hop_fake_fns[run_and_save_rng_state]

    def save_fake(op, *args, **kwargs):
        if on_neuron(args, kwargs):
            with unset_fake_temporarily():
                state = torch.neuron.get_rng_state()
            return state, op(*args, **kwargs)
        return original_fake(op, *args, **kwargs)

    registered_hop_fake_fns[run_and_save_rng_state] = save_fake

    # BackendSelect picks the device implementation by name; neuron goes to ours.
    original_select = run_and_save_rng_state.py_kernels[DispatchKey.BackendSelect]

    def save_select(op, *args, **kwargs):
        if on_neuron(args, kwargs):
            return _save_state(op, *args, **kwargs)
        return original_select(op, *args, **kwargs)

    run_and_save_rng_state.py_kernels[DispatchKey.BackendSelect] = save_select
    original_with_select = run_with_rng_state.py_kernels.get(DispatchKey.BackendSelect)
    if original_with_select is not None:
        def with_select(rng_state, op, *args, **kwargs):
            if on_neuron(args, kwargs):
                return _run_with_state(rng_state, op, *args, **kwargs)
            return original_with_select(rng_state, op, *args, **kwargs)

        run_with_rng_state.py_kernels[DispatchKey.BackendSelect] = with_select
    for hop in (run_and_save_rng_state, run_with_rng_state):
        hop._dispatch_cache.clear()


def run_under(mode_cls) -> None:
    """Run the two RNG ops under the TorchDispatchMode class `mode_cls` (the cost model's and the dry
    run's modes, which see every op of a compiled graph's wrapper): a higher-order op meets a mode
    before any device kernel, and without a rule for it stops the program. On neuron the op inside
    runs under the mode again, so the mode sees it like the graph's other ops; on any other device
    the op goes on past the mode (the next mode or the device's own rule)."""
    require("torch_neuronx.compiler._rng_hops.run_under (torch._prims.rng_prims' RNG ops under a mode)", WRITTEN_FOR)
    from torch._prims import rng_prims
    from torch._prims.rng_prims import run_and_save_rng_state, run_with_rng_state

    def save(mode, op, *args, **kwargs):
        if rng_prims.get_device(args, kwargs) != DEVICE:
            return run_and_save_rng_state(op, *args, **kwargs)   # the mode is popped while this runs
        with mode:
            return _save_state(op, *args, **kwargs)

    def run_with(mode, rng_state, op, *args, **kwargs):
        if rng_prims.get_device(args, kwargs) != DEVICE:
            return run_with_rng_state(rng_state, op, *args, **kwargs)
        with mode:
            return _run_with_state(rng_state, op, *args, **kwargs)

    if mode_cls not in run_and_save_rng_state.python_key_table:
        run_and_save_rng_state.py_impl(mode_cls)(save)
        run_with_rng_state.py_impl(mode_cls)(run_with)
