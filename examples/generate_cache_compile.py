"""Greedy generation of a tiny Qwen3 (random weights, built from its config) with the forward pass
compiled by the neuron backend, with a growing (dynamic) or a static KV cache.

Which graphs a run compiles depends on the cache: a dynamic cache grows by one token each step, so
every decode step is a new input shape and a new graph; a static cache keeps every decode step the
same shape, so decoding is one graph. The compile budget of a plan shows it (docs/compile-budget.md):

    python -m torch_neuronx.plan run -- examples/generate_cache_compile.py --cache dynamic
    python -m torch_neuronx.plan run -- examples/generate_cache_compile.py --cache static
"""
from __future__ import annotations

import argparse

import torch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache", choices=("dynamic", "static"), default="static")
    p.add_argument("--input-tokens", type=int, default=100)
    p.add_argument("--new-tokens", type=int, default=5)
    args = p.parse_args()

    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=16, intermediate_size=128, vocab_size=256)
    model = Qwen3ForCausalLM(config).to("neuron").eval()
    # the forward pass is the graph: static shapes, one graph per input signature (TorchNeuron's advice)
    model.forward = torch.compile(model.forward, backend="neuron", dynamic=False)
    ids = torch.randint(0, config.vocab_size, (1, args.input_tokens), device="neuron")
    kwargs = {"cache_implementation": "static"} if args.cache == "static" else {}
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=args.new_tokens,
                             min_new_tokens=args.new_tokens, do_sample=False, pad_token_id=0,
                             disable_compile=True, **kwargs)
    print(f"{args.cache} cache: generated {out.shape[1] - args.input_tokens} tokens")


if __name__ == "__main__":
    main()
