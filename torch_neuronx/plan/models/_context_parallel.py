"""Context parallelism in `plan train`: the sequence split over CP ranks, attention as a ring.

As torchtitan runs it: each micro-step's forward and backward run inside torch's
`context_parallel` over a CP mesh dimension, which shards the token ids, labels and positions
along the sequence (with its load balancing: rank r keeps chunks r and 2 CP - 1 - r of 2 CP, so
every rank's share of the causal mask is the same) and turns each SDPA call into ring attention
(the local queries against every rank's keys and values, passed round the CP group). Every layer
outside attention sees 1/CP of the tokens. FSDP shards the parameters over FSDP x CP ranks (the
CP ranks hold different tokens, so they reduce their gradients like data-parallel ranks).

The model's attention must be SDPA with a plain causal mask (no padding): transformers passes
`is_causal=True` and no mask then, which is what ring attention supports. The rotary positions
are not passed as a sharded buffer (torchtitan shards its `freqs_cis`): transformers would read
the load-balanced positions, which jump between the two chunks, as packed sequences and build a
mask. Each rank's rotary embedding runs on its local indices instead: the same ops and shapes,
so the same cost; a plan does not use the values.
"""
from __future__ import annotations

import contextlib

import torch


def check(layout, seq_len: int, zero1: bool) -> None:
    """The CP layouts `plan train` runs; the message names the flag to change."""
    if layout.cp == 1:
        return
    if zero1:
        raise ValueError(f"--zero1 with --cp {layout.cp}: context parallelism is planned with FSDP sharding over "
                         f"FSDP x CP (which shards the optimizer state already); drop --zero1")
    chunks = 2 * layout.cp
    if seq_len % chunks:
        raise ValueError(f"--seq-len {seq_len} must be a multiple of 2 x --cp = {chunks}: the load-balanced ring "
                         f"splits each sequence into 2 x CP equal chunks; e.g. --seq-len {seq_len + chunks - seq_len % chunks}")


def cp_mesh(layout):
    """The CP dimension of this rank's mesh: ranks 0, TP, .., (CP - 1) x TP of the world
    (pp, dp_replicate, fsdp x cp, tp), CP inside the FSDP dimension transformers builds."""
    from torch.distributed.device_mesh import init_device_mesh

    world = layout.world_size // layout.pp
    outer = world // (layout.cp * layout.tp)
    mesh = init_device_mesh("neuron", (outer, layout.cp, layout.tp), mesh_dim_names=("dp_outer", "cp", "tp_inner"))
    return mesh["cp"]


def attention_check(model) -> None:
    """Ring attention replaces SDPA; a model running another attention would run unsharded."""
    impl = getattr(model.config, "_attn_implementation", None)
    if impl != "sdpa":
        raise ValueError(f"--cp needs the model's attention to run through SDPA (attn_implementation='sdpa'); "
                         f"{type(model).__name__} runs {impl!r}: use --cp 1")


@contextlib.contextmanager
def sharded_sequence(mesh, ids: torch.Tensor, labels: torch.Tensor):
    """Inside: `ids` and `labels` hold this rank's load-balanced share of the sequence, and SDPA runs
    as ring attention over `mesh`; after, they are whole again (torch restores them). `mesh` None:
    nothing changes."""
    if mesh is None:
        yield
        return
    from torch.distributed.tensor.experimental import context_parallel

    with context_parallel(mesh, buffers=[ids, labels], buffer_seq_dims=[1, 1]):
        yield
