"""Offline tiny models and tokenizer."""
from __future__ import annotations

from transformers import AutoConfig

from torch_neuronx.integrations.tiny_models import build_tiny_model, build_tokenizer, shrink_config


def test_tokenizer_has_chat_template_and_left_padding():
    tok = build_tokenizer()
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True,
                                   tokenize=False)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    batch = tok(["a", "a longer prompt"], padding=True, pad_to_multiple_of=8)
    assert len(batch["input_ids"][0]) % 8 == 0 and batch["attention_mask"][0][0] == 0


def test_shrink_config_keeps_every_layer_type_and_maps_names():
    gpt2 = shrink_config(AutoConfig.for_model("gpt2"))
    assert (gpt2.n_embd, gpt2.n_layer, gpt2.n_head) == (64, 2, 4)
    qwen3_next = AutoConfig.for_model("qwen3_next")
    tiny = shrink_config(qwen3_next)
    assert tiny.num_hidden_layers == len(tiny.layer_types)
    assert set(tiny.layer_types) == set(qwen3_next.layer_types)


def test_layer_count_and_vocab_given_as_overrides(tmp_path):
    # regression: a seed attribute naming num_hidden_layers (or vocab_size) raised
    # "TypeError: dict() got multiple values for keyword argument"
    gpt2 = shrink_config(AutoConfig.for_model("gpt2"), seed_attrs={"num_hidden_layers": 3, "vocab_size": 300})
    assert (gpt2.n_layer, gpt2.vocab_size, gpt2.n_embd) == (3, 300, 64)
    # a per-layer list is cut to the requested count and still covers every layer type
    qwen3_next = AutoConfig.for_model("qwen3_next")
    tiny = shrink_config(qwen3_next, seed_attrs={"num_hidden_layers": 3})
    assert tiny.num_hidden_layers == len(tiny.layer_types) == 3
    assert set(tiny.layer_types) == set(qwen3_next.layer_types)
    # the public entry point forwards overrides to shrink_config; the saved model loads with 3 layers
    from transformers import AutoModelForCausalLM

    path = build_tiny_model(tmp_path / "tiny-qwen2", model_type="qwen2", num_hidden_layers=3)
    model = AutoModelForCausalLM.from_pretrained(path)
    assert model.config.num_hidden_layers == 3 and len(model.model.layers) == 3


def test_derived_sizes_are_consistent_so_the_cpu_reference_runs():
    # sizes the config's __init__ derives from the full hidden size must follow the tiny one; otherwise
    # these architectures fail on CPU and drop out of the compat sweep's denominator
    import torch
    from transformers import AutoModelForCausalLM

    mamba2 = shrink_config(AutoConfig.for_model("mamba2"))
    assert mamba2.num_heads * mamba2.head_dim == mamba2.expand * mamba2.hidden_size
    gptj = shrink_config(AutoConfig.for_model("gptj"))
    assert gptj.rotary_dim <= gptj.n_embd // gptj.n_head
    # multi-head latent attention caches every head: a GQA-sized static cache used to fail with
    # "The size of tensor a (2) must match the size of tensor b (4)"
    deepseek = shrink_config(AutoConfig.for_model("deepseek_v3"), vocab_size=256)
    assert deepseek.num_key_value_heads == deepseek.num_attention_heads == 4
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(deepseek).eval()
    ids = torch.randint(3, 256, (1, 6))
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=3, do_sample=False,
                         cache_implementation="static", pad_token_id=0)
    assert out.shape == (1, 9)
