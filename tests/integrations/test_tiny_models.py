"""Item 4: offline tiny models and tokenizer."""
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
