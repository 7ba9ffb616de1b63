"""Build a Hugging Face causal LM from its config alone, on neuron, sharded as the layout says.

The real `from_pretrained` path runs (TP plan, FSDP2 wrapping, dtype handling); `state_dict={}`
means no weights are read, so every parameter is initialised by the model's own init (shape-only
under the dry run).
"""
from __future__ import annotations

import contextlib

import torch

from ._config import causal_lm_class


@contextlib.contextmanager
def _quiet_loading():
    """The loading report lists every weight as MISSING: expected here (no weights), noise to a user."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def replicated_kv_config(config, tp: int):
    """The config as TP ranks hold it: with TP above the KV-head count, each rank keeps one KV head
    (NxD Inference's GQA replication: every KV head is copied to TP / KV ranks), i.e. the model TP
    shards has `tp` KV heads, each copy's weights and KV cache counted on its rank."""
    import copy

    from ._layout import kv_replication

    copies = kv_replication(tp, config)
    if copies <= 1:
        return config
    built = copy.deepcopy(config)
    text = built.get_text_config() if hasattr(built, "get_text_config") else built
    if getattr(text, "head_dim", None) is None:   # keep head_dim = hidden / heads of the real model
        text.head_dim = text.hidden_size // text.num_attention_heads
    text.num_key_value_heads = text.num_key_value_heads * copies
    return built


def build_causal_lm(config, dtype: torch.dtype, tp: int = 1, fsdp: int = 1, dp: int = 1, ep: int = 1,
                    sequence_parallel: bool = False):
    """The model on neuron:0: this rank's shard of DistributedConfig(tp_size, fsdp_size,
    dp_replicate_size, ep_size) when tp x fsdp x dp > 1 (the process group must have that many
    ranks); KV heads replicated when TP exceeds them (replicated_kv_config). `sequence_parallel`
    (TP alone): re-parallelized with sequence parallelism and a vocabulary-parallel loss
    (_sequence_parallel.py)."""
    config = replicated_kv_config(config, tp)
    cls = causal_lm_class(config)
    kwargs = {}
    if tp * fsdp * dp > 1:
        from transformers.distributed import DistributedConfig

        # --fsdp shards as DistributedConfig(fsdp_size) does; --dp replicates (HSDP replicas)
        kwargs["distributed_config"] = DistributedConfig(tp_size=tp, fsdp_size=fsdp, dp_replicate_size=dp,
                                                         ep_size=ep if ep > 1 else None)
    else:
        kwargs["device_map"] = "neuron:0"
    torch.neuron.set_device(0)
    with _quiet_loading():
        model = cls.from_pretrained(None, config=config, state_dict={}, dtype=dtype, **kwargs)
    if sequence_parallel:
        from . import _sequence_parallel as sp

        if tp < 2 or fsdp * dp * ep > 1:
            raise ValueError(f"sequence parallelism is planned over a TP group alone (tp > 1), got tp={tp}, "
                             f"fsdp={fsdp}, dp={dp}, ep={ep}")
        sp.apply(model)
    return model


def local_bytes(tensors) -> int:
    """Bytes this rank holds for `tensors` (a DTensor counts its local shard)."""
    total = 0
    for t in tensors:
        if t is None:
            continue
        local = t.to_local() if hasattr(t, "to_local") else t
        total += local.numel() * local.element_size()
    return total
