"""Sequence parallelism over a TP group, with torch's own tensor-parallel styles (as torchtitan applies them).

NxD Training runs tensor parallelism with sequence parallelism (`sequence_parallel: True` in its
model configs): outside the attention and MLP blocks, the residual stream, the RMSNorms and the
residual adds hold 1/TP of the sequence on each rank; the block's input is all-gathered over the
sequence and its row-parallel output reduce-scattered back (the same bytes as the all-reduce
they replace). The vocabulary head stays sharded over the vocabulary and the loss is
vocabulary-parallel (NxD's `parallel_cross_entropy`; torch's `loss_parallel`), so no rank
gathers the full logits. The embedding table is sharded over the vocabulary (NxD's
ParallelEmbedding) and its output reduce-scattered over the sequence.

The model comes from `build_causal_lm` with transformers' TP plan applied (its DTensor
parameters sharded as below); this replaces the forwards transformers installed with torch's
`parallelize_module` plan. The residual stream stays a DTensor of the global shape
(`use_local_output=False`), so the model's own code (cache positions, masks) sees the full
sequence length.
"""
from __future__ import annotations

import contextlib

import torch


def _tp_mesh(model):
    for p in model.parameters():
        if hasattr(p, "device_mesh"):
            return p.device_mesh
    raise ValueError("sequence parallelism needs a TP-sharded model (build_causal_lm with tp > 1)")


def _layers_prefix(model) -> str:
    """The decoder layers' path ("model.layers" for Hugging Face causal LMs)."""
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and name.endswith("layers"):
            return name
    raise ValueError(f"{type(model).__name__}: no decoder layer list found for sequence parallelism")


def supports(model) -> bool:
    """A Llama-style decoder (q/k/v/o and gate/up/down projections, two RMSNorms per layer)."""
    names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    return {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "input_layernorm",
            "post_attention_layernorm", "embed_tokens", "lm_head"} <= names


def plan(model) -> dict:
    """torch.distributed.tensor.parallel styles per module path (wildcards over the layers)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel)

    layers = _layers_prefix(model)
    base = layers.rsplit(".", 1)[0]
    seq = Shard(1)
    block_input = dict(input_kwarg_layouts={"hidden_states": seq},
                       desired_input_kwarg_layouts={"hidden_states": Replicate()})
    return {
        f"{base}.embed_tokens": RowwiseParallel(input_layouts=Replicate(), output_layouts=seq, use_local_output=False),
        f"{layers}.*.input_layernorm": SequenceParallel(),
        f"{layers}.*.self_attn": PrepareModuleInput(**block_input),
        f"{layers}.*.self_attn.q_proj": ColwiseParallel(),
        f"{layers}.*.self_attn.k_proj": ColwiseParallel(),
        f"{layers}.*.self_attn.v_proj": ColwiseParallel(),
        f"{layers}.*.self_attn.o_proj": RowwiseParallel(output_layouts=seq, use_local_output=False),
        f"{layers}.*.post_attention_layernorm": SequenceParallel(),
        f"{layers}.*.mlp": PrepareModuleInput(input_layouts=(seq,), desired_input_layouts=(Replicate(),)),
        f"{layers}.*.mlp.gate_proj": ColwiseParallel(),
        f"{layers}.*.mlp.up_proj": ColwiseParallel(),
        f"{layers}.*.mlp.down_proj": RowwiseParallel(output_layouts=seq, use_local_output=False),
        f"{base}.norm": SequenceParallel(),
        "lm_head": ColwiseParallel(input_layouts=seq, output_layouts=Shard(-1), use_local_output=False),
    }


def apply(model):
    """Re-parallelize a transformers-TP model with sequence parallelism (torch's styles), in place, when
    it is a Llama-style decoder (`supports`); `model._sequence_parallel` says whether it was."""
    from torch.distributed.tensor.parallel import parallelize_module

    if not supports(model):
        return model   # left as transformers sharded it; the caller reports sequence parallelism off
    mesh = _tp_mesh(model)
    for module in model.modules():   # drop the forwards transformers' TP plan installed
        if getattr(module, "_is_hooked", False) and "forward" in module.__dict__:
            del module.forward
    parallelize_module(model, mesh, plan(model))
    model._sequence_parallel = True
    return model


def loss_context(model):
    """The context the forward and backward run in: torch's vocabulary-parallel cross entropy for a
    sequence-parallel model (its logits stay sharded over the vocabulary), else nothing."""
    if getattr(model, "_sequence_parallel", False):
        from torch.distributed.tensor.parallel import loss_parallel

        return loss_parallel()
    return contextlib.nullcontext()
