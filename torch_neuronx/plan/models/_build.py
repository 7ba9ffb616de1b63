"""Build a Hugging Face causal LM from its config alone, on neuron, sharded as the layout says.

The real `from_pretrained` path runs (TP plan, FSDP2 wrapping, dtype handling); `state_dict={}`
means no weights are read, so every parameter is initialised by the model's own init (shape-only
under the dry run).
"""
from __future__ import annotations

import contextlib

import torch

from ._load_config import causal_lm_class


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


# Megatron-LM's default `--make-vocab-size-divisible-by` (megatron/training/arguments.py): its
# `_vocab_size_with_padding` (megatron/training/tokenizer/tokenizer.py) pads the vocabulary to a
# multiple of this x the TP size; NeMo's Megatron models inherit it
MEGATRON_VOCAB_DIVISIBLE_BY = 128


def padded_vocab_size(vocab: int, multiple: int) -> int:
    """`vocab` rounded up to a multiple of `multiple` (Megatron's `_vocab_size_with_padding` rule)."""
    return -(-vocab // multiple) * multiple


def training_vocab_multiple(vocab, tp: int, divisible_by: int | None) -> int:
    """The multiple a Megatron-style trainer pads the vocabulary to: `divisible_by` x TP when given
    (Megatron's --make-vocab-size-divisible-by); by default Megatron's 128 x TP when TP does not
    divide the vocabulary (the model cannot be split otherwise), else 1: a vocabulary TP divides
    stays as it is, as NxD Training and transformers' TP plans train it."""
    if divisible_by is not None:
        if not isinstance(divisible_by, int) or divisible_by < 1:
            raise ValueError(f"--make-vocab-size-divisible-by must be a positive integer, got {divisible_by!r}")
        return divisible_by * tp
    if isinstance(vocab, int) and tp > 1 and vocab % tp:
        return MEGATRON_VOCAB_DIVISIBLE_BY * tp
    return 1


def padded_for_tp(config, tp: int, *, heads: bool = True, vocab_multiple: int | None = None):
    """The config as NxD Inference compiles it when TP does not divide the attention heads or the
    vocabulary: the query heads padded with zero heads up to the next multiple of TP (NeuronX
    Distributed's `get_number_of_extra_heads` / `pad_model`), in a multi-head model (KV heads =
    heads) the KV heads with them (its GQA "convert to MHA" sharding), and the vocabulary padded
    to a multiple of TP (its parallel embedding and LM head pad their rows). The padded rows are
    computed and stored like real ones, which is what the padded program costs. `config` itself
    when nothing is padded. Training (`heads=False`, `vocab_multiple` from training_vocab_multiple)
    pads the vocabulary alone, as Megatron does; heads TP does not divide are refused there."""
    import copy

    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads_n, vocab = getattr(text, "num_attention_heads", None), getattr(text, "vocab_size", None)
    multiple = tp if vocab_multiple is None else vocab_multiple
    pad_heads = heads and isinstance(heads_n, int) and tp > 1 and heads_n % tp != 0
    pad_vocab = isinstance(vocab, int) and multiple > 1 and vocab % multiple != 0
    if not (pad_heads or pad_vocab):
        return config
    built = copy.deepcopy(config)
    text = built.get_text_config() if hasattr(built, "get_text_config") else built
    if pad_heads:
        padded = padded_vocab_size(heads_n, tp)
        if getattr(text, "head_dim", None) is None:   # the real model's head size, not hidden / padded heads
            text.head_dim = text.hidden_size // heads_n
        if getattr(text, "num_key_value_heads", None) in (None, heads_n):
            text.num_key_value_heads = padded
        text.num_attention_heads = padded
    if pad_vocab:
        text.vocab_size = padded_vocab_size(vocab, multiple)
    return built


def padding_fields(original, padded) -> dict:
    """What a report says about padding: `attention_heads_padded` and `vocab_padded` (absent when
    that dimension was not padded)."""
    if padded is original:
        return {}
    text = padded.get_text_config() if hasattr(padded, "get_text_config") else padded
    real = original.get_text_config() if hasattr(original, "get_text_config") else original
    out = {}
    if getattr(text, "num_attention_heads", None) != getattr(real, "num_attention_heads", None):
        out["attention_heads_padded"] = {
            "heads": real.num_attention_heads, "padded_to": text.num_attention_heads,
            "kv_heads": getattr(real, "num_key_value_heads", None) or real.num_attention_heads,
            "kv_padded_to": text.num_key_value_heads}
    if getattr(text, "vocab_size", None) != getattr(real, "vocab_size", None):
        out["vocab_padded"] = {"vocab_size": real.vocab_size, "padded_to": text.vocab_size}
    return out


def parameter_count(config, model_class=None) -> int:
    """Parameters of the whole model the config describes (every layer, every stage), counted on the
    meta device; `model_class` defaults to the config's causal LM."""
    with torch.device("meta"):
        model = (model_class or causal_lm_class(config))._from_config(config)
    return sum(p.numel() for p in model.parameters())


def build_causal_lm(config, dtype: torch.dtype, tp: int = 1, fsdp: int = 1, dp: int = 1, ep: int = 1,
                    sequence_parallel: bool = False, model_class=None):
    """The model on neuron:0: this rank's shard of DistributedConfig(tp_size, fsdp_size,
    dp_replicate_size, ep_size) when tp x fsdp x dp > 1 (the process group must have that many
    ranks); KV heads replicated when TP exceeds them (replicated_kv_config). `sequence_parallel`
    (TP alone): re-parallelized with sequence parallelism and a vocabulary-parallel loss
    (_sequence_parallel.py). `model_class`: another Auto class's model of the config (plan train's
    masked-LM and image-classification tasks, _tasks.py); default the causal LM."""
    config = replicated_kv_config(config, tp)
    cls = model_class or causal_lm_class(config)
    kwargs = {}
    if tp * fsdp * dp > 1:
        from transformers.distributed import DistributedConfig

        # --fsdp shards as DistributedConfig(fsdp_size) does; --dp replicates (HSDP replicas). dp_replicate_size
        # is named only when asked: transformers before 5.20 (vLLM's environment, docs/serving.md) lacks it
        replicas = {"dp_replicate_size": dp} if dp > 1 else {}
        kwargs["distributed_config"] = DistributedConfig(tp_size=tp, fsdp_size=fsdp, ep_size=ep if ep > 1 else None,
                                                         **replicas)
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
