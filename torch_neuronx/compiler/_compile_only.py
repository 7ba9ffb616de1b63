"""Compile-only mode (TORCH_NEURONX_COMPILE_ONLY=1): every graph compiles, nothing executes.

TorchNeuron documents a compile-only mode for torch.compile (its "How torch.compile works on
Neuron" page, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/about-torch-compile.html):
compile, and fill the persistent cache, without running on the device, so a cache for a layout
can be warmed on a machine that has none. Here the graph goes through the whole backend (Dynamo,
AOTAutograd, Inductor, the on-disk caches and the warm index of compiler/_compile_log.py); the
callable handed back to Dynamo then skips the program: each call returns uninitialised tensors of
the outputs' shapes, strides, dtypes and devices (found by running the graph once on fake tensors
at compile time), writes nothing, and mutates no input. Outputs that need grad stay attached to
the inputs that need grad, so a training step's backward runs through and its gradients are
uninitialised too. As in neuron_parallel_compile's graph-extraction mode, the script's values are
invalid: use the mode to compile, not to compute.
"""
from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten


class CompileOnlyError(RuntimeError):
    """A graph cannot be compiled without executing (its outputs' shapes are unknown)."""


def output_specs(gm, example_inputs):
    """(treespec, [(shape, stride, dtype, device, requires_grad) or a non-tensor value]) of one call."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():
        fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
        with fake_mode:
            fakes = []
            for x in example_inputs:
                if isinstance(x, torch.Tensor):
                    f = fake_mode.from_tensor(x)
                    if x.requires_grad and f.is_leaf:
                        f.requires_grad_(x.requires_grad)
                    fakes.append(f)
                else:
                    fakes.append(x)
            out = gm(*fakes)
    flat, spec = tree_flatten(out)
    specs = [(tuple(o.shape), tuple(o.stride()), o.dtype, o.device, o.requires_grad)
             if isinstance(o, torch.Tensor) else o for o in flat]
    return spec, specs


class _Detached(torch.autograd.Function):
    """Outputs (uninitialised) that backward connects to the inputs needing grad; backward hands
    back uninitialised gradients. Neither direction runs the program."""

    @staticmethod
    def forward(ctx, specs, *inputs):
        ctx.input_meta = [(i.shape, i.dtype, i.device) for i in inputs]
        return tuple(torch.empty_strided(s[0], s[1], dtype=s[2], device=s[3]) for s in specs)

    @staticmethod
    def backward(ctx, *grads):
        return (None, *(torch.empty(shape, dtype=dtype, device=device) for shape, dtype, device in ctx.input_meta))


def not_executed(gm, example_inputs, graph_name: str):
    """The callable Dynamo gets in compile-only mode (see the module docstring)."""
    try:
        spec, specs = output_specs(gm, example_inputs)
    except Exception as err:  # noqa: BLE001 - said with the graph and the way out
        raise CompileOnlyError(
            f"graph {graph_name} compiled, but its output shapes could not be found on fake tensors "
            f"({type(err).__name__}: {err}); unset TORCH_NEURONX_COMPILE_ONLY to run it") from err
    is_tensor = [isinstance(s, tuple) and len(s) == 5 and isinstance(s[2], torch.dtype) for s in specs]
    tensor_specs = [s for s, t in zip(specs, is_tensor) if t]
    any_grad = any(s[4] for s in tensor_specs)

    def call(*args):
        grad_inputs = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        if any_grad and grad_inputs and torch.is_grad_enabled():
            made = [t if s[4] else t.detach() for t, s in zip(_Detached.apply(tensor_specs, *grad_inputs), tensor_specs)]
        else:
            made = [torch.empty_strided(s[0], s[1], dtype=s[2], device=s[3]) for s in tensor_specs]
        it = iter(made)
        return tree_unflatten([next(it) if t else s for s, t in zip(specs, is_tensor)], spec)

    return call
