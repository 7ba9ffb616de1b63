"""Context parallelism (`torch.distributed.tensor.experimental.context_parallel`) for neuron's SDPA.

SDPA on neuron runs `aten._scaled_dot_product_flash_attention_for_cpu` (the CPU's flash kernel, so
results equal CPU bit for bit). Context parallelism only knows the CUDA attention ops (flash,
efficient, cudnn): it swaps them for ring attention through DTensor's custom-op handlers and gives
them sequence-sharded (Shard(2)) strategies while it is active. SDPA cannot be routed to those ops
on a non-CUDA device (it calls them only when the query is on CUDA), so this adapter teaches
context parallelism the op neuron does run, with torch's own pieces:

- handlers for the CPU flash op and its backward run `_templated_ring_attention(_backward)`, the
  ring the CUDA ops use (its `_RotateMethod` all-gather or all-to-all, its load balancing);
- their Shard(2) strategies are registered while context parallelism is enabled, and removed
  with torch's own when it is disabled (Shard(2) is wrong for SDPA outside it);
- a mesh whose device type is not the buffers' (a "cpu" mesh for neuron buffers, or the reverse)
  is refused with an error that says which mesh to build, instead of failing inside a collective.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch

from .._wrap import wrap_once

aten = torch.ops.aten
FWD = aten._scaled_dot_product_flash_attention_for_cpu.default
BWD = aten._scaled_dot_product_flash_attention_for_cpu_backward.default
SEQ_DIM = 2  # context parallelism shards (batch, heads, seq, dim) along seq, as torch's ring does
# torch internals this adapter calls; checked against torch 2.13, 2.14 and 2.15 (checked in patch)
_NEEDED = ("custom_ops", "_templated_ring_attention", "_templated_ring_attention_backward",
           "_enable_cp_dtensor_dispatcher", "_disable_cp_dtensor_dispatcher", "context_parallel")
_KNOWN_TORCH = ("2.13", "2.14", "2.15")


def _fwd_strategy(op_schema):
    from torch.distributed.tensor._ops.utils import expand_to_full_mesh_op_strategy
    from torch.distributed.tensor.placement_types import Shard

    # output, logsumexp | query, key, value
    return expand_to_full_mesh_op_strategy(op_schema.get_mesh_from_args(), op_schema,
                                           [[Shard(SEQ_DIM)] * 5], input_index=2)


def _bwd_strategy(op_schema):
    from torch.distributed.tensor._ops.utils import expand_to_full_mesh_op_strategy
    from torch.distributed.tensor.placement_types import Shard

    # grad_q, grad_k, grad_v | grad_out, query, key, value, out, logsumexp
    return expand_to_full_mesh_op_strategy(op_schema.get_mesh_from_args(), op_schema,
                                           [[Shard(SEQ_DIM)] * 9], input_index=3)


def _ring_forward(module, mesh, query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None,
                  scale=None):
    if attn_mask is not None:
        raise NotImplementedError("context_parallel on neuron: SDPA's attn_mask is not supported (as for "
                                  "CUDA's ring attention); use is_causal=True for a causal mask")
    return module._templated_ring_attention(mesh.get_group(), SEQ_DIM, FWD, query=query, key=key,
                                            value=value, is_causal=is_causal, dropout_p=dropout_p,
                                            scale=scale)


def _ring_backward(module, mesh, grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, *,
                   attn_mask=None, scale=None):
    return module._templated_ring_attention_backward(
        mesh.get_group(), SEQ_DIM, BWD, grad_out=grad_out, grad_out_name="grad_out", query=query,
        key=key, value=value, out=out, logsumexp=logsumexp, is_causal=is_causal, dropout_p=dropout_p,
        attn_mask=attn_mask, scale=scale)


def _make_handler(module):
    ring = {FWD: _ring_forward, BWD: _ring_backward}

    def handler(op_call, args, kwargs):
        # as torch's _sdpa_handler: propagate (Shard(2) in, Shard(2) out), run the ring on local shards
        from torch.distributed.tensor import DTensor

        dispatcher = DTensor._op_dispatcher
        op_info = dispatcher.unwrap_to_op_info(op_call, args, kwargs)
        dispatcher.sharding_propagator.propagate(op_info)
        sharding = op_info.output_sharding
        if sharding is None or sharding.needs_redistribute:
            raise RuntimeError(f"context_parallel on neuron: {op_call} expects query, key and value "
                               f"sharded on the sequence dim (Shard({SEQ_DIM})) of one mesh")
        local = ring[op_call](module, op_info.compute_mesh, *op_info.local_args, **op_info.local_kwargs)
        return dispatcher.wrap(local, sharding.output_spec)

    return handler


def _check_mesh(mesh, buffers) -> None:
    for i, buffer in enumerate(buffers or ()):
        if isinstance(buffer, torch.Tensor) and buffer.device.type != mesh.device_type:
            raise ValueError(
                f"context_parallel: buffers[{i}] is on {buffer.device} but the mesh is a "
                f"{mesh.device_type!r} mesh; build it on the buffers' device, e.g. "
                f"init_device_mesh({buffer.device.type!r}, ({mesh.size()},)), or move the buffers "
                f"to {mesh.device_type!r}")


def _check_version(module) -> None:
    from .._torch_versions import require

    require("torch_neuronx.integrations.context_parallel.patch (torch's context-parallel op handlers)",
            _KNOWN_TORCH)
    missing = [name for name in _NEEDED if not hasattr(module, name)]
    if missing:
        raise RuntimeError(
            f"torch_neuronx.integrations.context_parallel.patch was written for torch "
            f"{', '.join(_KNOWN_TORCH)} ({module.__name__}); torch {torch.__version__} lacks "
            f"{', '.join(missing)}: update it for this version")


@contextmanager
def _strategy_context(op, strategy):
    """`strategy` is op's DTensor sharding strategy inside, whatever it was before afterwards.

    torch 2.13's context parallelism did this with `_sharding_rules._op_strategy_context`; 2.14
    replaced it with a single-dim variant for its own ops. The propagator's strategy table and
    `register_op_strategy` it used are the same in both, so this is that context, kept here."""
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._ops.utils import register_op_strategy

    propagator = DTensor._op_dispatcher.sharding_propagator
    saved = {table: getattr(propagator, table).get(op) for table in ("op_strategy_funcs", "op_to_schema_info")}
    register_op_strategy(op)(strategy)
    try:
        yield
    finally:
        for table, value in saved.items():
            entries = getattr(propagator, table)
            if value is None:
                entries.pop(op, None)
            else:
                entries[op] = value


def patch(module) -> None:
    _check_version(module)
    handler = _make_handler(module)
    module.custom_ops[FWD] = handler  # read by context parallelism each time it is enabled
    module.custom_ops[BWD] = handler
    contexts: list = []

    def make_enable(original):
        def _enable_cp_dtensor_dispatcher():
            original()
            if not contexts:
                for op, strategy in ((FWD, _fwd_strategy), (BWD, _bwd_strategy)):
                    ctx = _strategy_context(op, strategy)
                    ctx.__enter__()
                    contexts.append(ctx)

        return _enable_cp_dtensor_dispatcher

    def make_disable(original):
        def _disable_cp_dtensor_dispatcher():
            original()
            while contexts:
                contexts.pop().__exit__(None, None, None)

        return _disable_cp_dtensor_dispatcher

    def make_context_parallel(original):
        def context_parallel(mesh, *args, **kwargs):
            _check_mesh(mesh, kwargs.get("buffers", args[0] if args else None))
            return original(mesh, *args, **kwargs)

        return context_parallel

    wrap_once(module, "_enable_cp_dtensor_dispatcher", make_enable)
    wrap_once(module, "_disable_cp_dtensor_dispatcher", make_disable)
    wrap_once(module, "context_parallel", make_context_parallel)
