"""Tiny, offline Hugging Face models for examples, tests and the compatibility sweep.

Nothing is downloaded: a config with small dimensions gets random weights, is saved with
`save_pretrained` next to a tokenizer trained on a few strings, and is then loaded back by the caller
through the real `from_pretrained` path.

    from torch_neuronx.integrations.tiny_models import build_tiny_model
    path = build_tiny_model("/tmp/tiny-llama")            # a Llama-style causal LM + tokenizer
    model = AutoModelForCausalLM.from_pretrained(path, device_map="neuron")

`shrink_config(config)` makes any transformers config small (the compat sweep builds every causal-LM
architecture with it); `build_tokenizer()` returns a byte-level BPE tokenizer with a ChatML template.
"""
from __future__ import annotations

import copy
import os

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

_CORPUS = [
    "Hello! How are you today?",
    "The quick brown fox jumps over the lazy dog.",
    "Trainium NeuronCores run PyTorch programs compiled from graphs.",
    "What is the capital of France? The capital of France is Paris.",
    "Tell me a short story about a robot who learns to paint.",
    "def add(a, b):\n    return a + b\n",
    "user assistant system: you are a helpful assistant.",
    "0 1 2 3 4 5 6 7 8 9 10 100 1000",
]


def build_tokenizer(vocab_size: int = 320, corpus: list[str] | None = None):
    """A byte-level BPE tokenizer (any text encodes) with ChatML special tokens and chat template.

    `<|endoftext|>` is both the pad and the bos token, `<|im_end|>` the eos token; padding is on the left,
    as decoder-only generation wants.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus or _CORPUS, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", padding_side="left")
    fast.chat_template = CHATML_TEMPLATE
    return fast


# Standard config attribute -> tiny value. Configs map their own names onto these through
# `attribute_map` (e.g. GPT-2's n_embd), so setting the standard name works for most of them.
_TINY = {
    "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "intermediate_size": 128, "head_dim": 16, "max_position_embeddings": 512,
    # mixture of experts
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "moe_num_experts": 4,
    "num_experts_per_tok": 2, "moe_topk": 2, "moe_intermediate_size": 64, "expert_intermediate_size": 64,
    "shared_expert_intermediate_size": 64, "n_shared_experts": 1, "num_shared_experts": 1,
    "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "moe_k": 2, "moe_num_shared_experts": 1,
    # multi-head latent attention (DeepSeek-style)
    "kv_lora_rank": 16, "q_lora_rank": 32, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
    "index_head_dim": 16, "index_n_heads": 2, "index_topk": 8,
    # state-space / linear-attention layers
    "state_size": 8, "ssm_state_size": 8, "mamba_d_state": 8, "mamba_n_heads": 8, "mamba_d_head": 16,
    "mamba_head_dim": 16, "mamba_n_groups": 1, "n_groups": 1, "mamba_expand": 2, "expand": 2,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
    "linear_value_head_dim": 16, "time_step_rank": 8, "num_heads": 4,
    # encoder-decoder families whose decoder is used as a causal LM (BART, Marian, Whisper, ...)
    "encoder_layers": 2, "decoder_layers": 2, "num_decoder_layers": 2, "encoder_attention_heads": 4,
    "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "d_model": 64,
    "d_ff": 128, "d_kv": 16, "n_positions": 512, "n_ctx": 512,
    # others
    "rope_scaling": None,
    "hidden_size_per_layer_input": 16, "vocab_size_per_layer_input": None, "laurel_rank": 8,
    "num_kv_shared_layers": 0,
    # sizes that __init__ derives from the full hidden size and that setattr does not recompute
    "rotary_dim": 8, "attention_hidden_size": 64, "mamba_d_ssm": 128, "embedding_dim": 64,
    # hybrid layouts given as period/offset (Jamba): layer 1 of 2 is attention, odd layers are MoE
    "attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2, "expert_layer_offset": 1,
}
_LAYER_COUNT_KEYS = ("num_hidden_layers",)


def _select_layers(layer_types: list, n: int) -> list[int]:
    """Indices of `n` layers covering every distinct layer type (first occurrence of each, in order)."""
    picked: list[int] = []
    seen = set()
    for i, t in enumerate(layer_types):
        key = repr(t)
        if key not in seen:
            seen.add(key)
            picked.append(i)
    for i in range(len(layer_types)):
        if len(picked) >= n:
            break
        if i not in picked:
            picked.append(i)
    return sorted(picked)


def shrink_config(config, vocab_size: int = 320, num_layers: int = 2, seed_attrs: dict | None = None):
    """A copy of a transformers config with tiny dimensions (any architecture, best effort).

    Per-layer lists (`layer_types`, per-layer MoE/attention flags) are cut to the kept layers, which cover
    every distinct layer type. Nested sub-configs (`text_config`, `decoder`...) are shrunk the same way.
    `seed_attrs` overrides the tiny values.
    """
    config = copy.deepcopy(config)
    # `seed_attrs` may name the layer count or vocabulary itself (build_tiny_model(..., num_hidden_layers=3)):
    # it then wins over the arguments, and the layer count also decides which layers are kept below
    seed = dict(seed_attrs or {})
    num_layers = seed.pop("num_hidden_layers", num_layers)
    vocab_size = seed.pop("vocab_size", vocab_size)
    tiny = {**_TINY, "num_hidden_layers": num_layers, "vocab_size": vocab_size, **seed}
    old_layers = getattr(config, "num_hidden_layers", None)
    # per-layer lists first: they decide how many layers are kept
    keep = None
    if isinstance(old_layers, int) and old_layers > 0:
        for name in ("layer_types", "layers_block_type", "hybrid_override_pattern", "block_types"):
            value = getattr(config, name, None)
            if isinstance(value, (list, tuple)) and len(value) == old_layers:
                keep = _select_layers(list(value), num_layers)
                break
            if isinstance(value, str) and len(value) == old_layers and name != "block_types":
                keep = _select_layers(list(value), num_layers)
                break
        if keep is None:
            for name, value in vars(config).items():
                if ("layer" in name and isinstance(value, (list, tuple)) and 0 < len(value) < old_layers
                        and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < old_layers
                                for i in value)):
                    others = [i for i in range(old_layers) if i not in value]
                    keep = sorted({value[0], *(others[:1])})
                    break
        if keep is None:
            keep = list(range(min(num_layers, old_layers)))
        tiny["num_hidden_layers"] = len(keep)
    known = set(vars(config)) | set(getattr(config, "attribute_map", {}) or {})
    for key, value in tiny.items():
        if key in known:
            try:
                setattr(config, key, value)
            except Exception:  # some configs validate on setattr; keep their default
                pass
    if keep is not None:
        for name, value in list(vars(config).items()):
            if name.startswith("_") or name in _LAYER_COUNT_KEYS:
                continue
            if ("layer" in name and isinstance(value, (list, tuple)) and 0 < len(value) < old_layers
                    and all(isinstance(i, int) and not isinstance(i, bool) for i in value)
                    and all(0 <= i < old_layers for i in value)):
                setattr(config, name, [keep.index(i) for i in value if i in keep])
                continue
            if isinstance(value, (list, tuple)) and len(value) == old_layers and old_layers > 1:
                cut = [value[i] for i in keep]
                setattr(config, name, type(value)(cut) if isinstance(value, tuple) else cut)
            elif isinstance(value, str) and len(value) == old_layers and ("pattern" in name or "block" in name):
                setattr(config, name, "".join(value[i] for i in keep))
    attrs = vars(config)
    if "qk_rope_head_dim" in attrs and "qk_nope_head_dim" in attrs:  # multi-head latent attention
        if "num_key_value_heads" in attrs and "num_attention_heads" in attrs and "num_key_value_heads" not in seed:
            # MLA caches keys and values expanded to every attention head (the real configs set
            # num_key_value_heads == num_attention_heads); a GQA-sized cache breaks the static cache.
            # vars(): per-layer (heterogeneous) configs refuse the attribute read
            try:
                config.num_key_value_heads = attrs["num_attention_heads"]
            except Exception:  # a config validating on setattr keeps its value
                pass
        if "qk_head_dim" in attrs:
            config.qk_head_dim = config.qk_rope_head_dim + config.qk_nope_head_dim
        if "head_dim" in attrs:
            config.head_dim = config.qk_rope_head_dim  # rotary embedding size, as DeepseekV3Config sets it
    if all(k in attrs for k in ("expand", "num_heads", "head_dim", "hidden_size")) and "num_heads" not in seed:
        # Mamba-2 splits its expanded inner size into heads: num_heads * head_dim must equal it
        config.num_heads = attrs["expand"] * attrs["hidden_size"] // attrs["head_dim"]
    if "attn_layer_indices" in vars(config) and not config.attn_layer_indices:
        config.attn_layer_indices = [tiny["num_hidden_layers"] - 1]  # a hybrid needs one attention layer
    for name, value in list(vars(config).items()):
        if hasattr(value, "to_dict") and hasattr(value, "model_type") and name != "quantization_config":
            setattr(config, name, shrink_config(value, vocab_size, num_layers, seed_attrs))
    for name in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value >= vocab_size:
            setattr(config, name, 0)
    return config


def tiny_llama_config(vocab_size: int, **overrides):
    """The Llama-style config the examples and benchmarks use (hidden 64, 2 layers, GQA 4/2)."""
    from transformers import LlamaConfig

    kwargs = dict(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
                  tie_word_embeddings=False)
    kwargs.update(overrides)
    return LlamaConfig(**kwargs)


def build_tiny_model(path: str | os.PathLike, model_type: str = "llama", seed: int = 0, dtype=None,
                     vocab_size: int = 320, **config_overrides) -> str:
    """Write a tiny causal LM with random weights and a local tokenizer to `path`; return the path.

    `model_type="llama"` uses `tiny_llama_config`; any other registered model type is built from its
    default config through `shrink_config`. Token ids of the tokenizer are set on the config.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    path = os.fspath(path)
    tokenizer = build_tokenizer(vocab_size)
    n_vocab = len(tokenizer)
    if model_type == "llama":
        config = tiny_llama_config(n_vocab, **config_overrides)
    else:
        config = shrink_config(AutoConfig.for_model(model_type), vocab_size=n_vocab, seed_attrs=config_overrides)
    config.pad_token_id = tokenizer.pad_token_id
    config.bos_token_id = tokenizer.bos_token_id
    config.eos_token_id = tokenizer.eos_token_id
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = AutoModelForCausalLM.from_config(config)
    finally:
        torch.random.set_rng_state(state)
    if dtype is not None:
        model = model.to(dtype)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
