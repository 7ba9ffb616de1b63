"""A Llama at realistic width (hidden 2048, the width of Llama 3.2 1B) forward + backward on
neuron in bf16, timed next to the same steps in fp32.

The model is built from a config (no download): Llama 3.2 1B's width, heads and MLP size
with fewer layers and a smaller vocabulary, so that the fp32 run fits a small host's memory
and the whole script takes about a minute. On a host whose CPU has no native bf16 dot product
(ONEDNN_MAX_CPU_ISA=AVX2 shows it on any x86 host), bf16 matmuls accumulate in fp32
(TORCH_NEURONX_HOST_LOW_PRECISION_GEMM=auto, docs/numerics.md) and bf16 runs at fp32 speed.

    python examples/bf16_llama_width2048.py                            # this host as it is
    ONEDNN_MAX_CPU_ISA=AVX2 python examples/bf16_llama_width2048.py    # as an AVX2-only host
    python examples/bf16_llama_width2048.py --layers 16 --vocab 128256  # the full 1.2B model
"""
from __future__ import annotations

import argparse
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

import torch_neuronx


def build(layers: int, vocab: int) -> LlamaForCausalLM:
    config = LlamaConfig(hidden_size=2048, intermediate_size=8192, num_attention_heads=32,
                         num_key_value_heads=8, num_hidden_layers=layers, vocab_size=vocab,
                         max_position_embeddings=2048, attn_implementation="sdpa")
    torch.manual_seed(0)
    return LlamaForCausalLM(config)


def time_steps(model, dtype, tokens, steps: int) -> list[float]:
    model = model.to("neuron", dtype)
    ids = tokens.to("neuron")
    times = []
    for _ in range(steps + 1):   # the first step warms up
        start = time.perf_counter()
        model.zero_grad(set_to_none=True)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.neuron.synchronize()
        times.append(time.perf_counter() - start)
    model.to("cpu", torch.float32)
    return times[1:]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args(argv)

    info = torch_neuronx.host_info()
    print(f"host {info['cpu']} ({info['cpu_capability']}), native bf16 GEMM: {info['native_bf16_gemm']}, "
          f"bf16 matmuls: {info['low_precision_gemm']['bfloat16']} ({info['low_precision_gemm']['mode']})")
    model = build(args.layers, args.vocab)
    params = sum(p.numel() for p in model.parameters())
    tokens = torch.randint(0, args.vocab, (1, args.tokens), generator=torch.Generator().manual_seed(1))
    print(f"Llama hidden 2048, {args.layers} layers, {params / 1e6:.0f}M parameters, 1 x {args.tokens} tokens, "
          f"forward + backward")
    results = {}
    for dtype in (torch.float32, torch.bfloat16):
        results[dtype] = min(time_steps(model, dtype, tokens, args.steps))
        print(f"  {str(dtype).replace('torch.', ''):9} {results[dtype]:.2f} s per step")
    print(f"  bf16 / fp32: {results[torch.bfloat16] / results[torch.float32]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
