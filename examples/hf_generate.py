"""Generation with transformers on neuron, unchanged transformers code.

    python examples/hf_generate.py --model Qwen/Qwen3-0.6B        # connected machine: hub model
    python examples/hf_generate.py --tiny                          # offline: a tiny local model first

`device_map="neuron"` loads the weights onto NeuronCore 0. The chat prompts are left padded to a multiple
of 16 (few distinct shapes -> few compiled graphs). The first generation uses the dynamic cache (eager);
the second a static cache, whose decode step transformers compiles automatically with backend "neuron",
with the prompt prefilled in chunks (`prefill_chunk_size`). `--check` compares the greedy tokens with
the CPU's for the same weights.
"""
from __future__ import annotations

import argparse
import tempfile
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

PROMPTS = ["What is the capital of France?", "Write a haiku about the sea."]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="Qwen/Qwen3-0.6B")
    p.add_argument("--tiny", action="store_true", help="build a tiny local model first (offline)")
    p.add_argument("--device-map", default="neuron")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--max-new-tokens", type=int, default=24)
    p.add_argument("--pad-to-multiple-of", type=int, default=16)
    p.add_argument("--prefill-chunk-size", type=int, default=16)
    p.add_argument("--check", action="store_true", help="compare greedy tokens with CPU")
    args = p.parse_args()

    model_id = args.model
    if args.tiny:
        from torch_neuronx.integrations.tiny_models import build_tiny_model

        model_id = build_tiny_model(tempfile.mkdtemp(prefix="tiny-llama-"))
    dtype = getattr(torch, args.dtype)
    tokenizer = AutoTokenizer.from_pretrained(model_id, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(model_id, device_map=args.device_map, dtype=dtype)
    print(f"loaded {model_id} on {model.device} ({dtype})")

    messages = [[{"role": "user", "content": text}] for text in PROMPTS]
    texts = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    inputs = tokenizer(texts, return_tensors="pt", padding=True, pad_to_multiple_of=args.pad_to_multiple_of)
    prompt_len = inputs["input_ids"].shape[1]
    common = dict(do_sample=False, max_new_tokens=args.max_new_tokens, pad_token_id=tokenizer.pad_token_id)

    results = {}
    for name, extra in [("dynamic cache, eager", {}),
                        ("static cache, decode compiled", dict(cache_implementation="static",
                                                               prefill_chunk_size=args.prefill_chunk_size))]:
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(**inputs.to(model.device), **common, **extra)
        new = out[:, prompt_len:].cpu()
        results[name] = new
        print(f"\n[{name}] {time.perf_counter() - t0:.1f} s")
        for text, toks in zip(PROMPTS, new):
            print(f"  {text!r} -> {tokenizer.decode(toks, skip_special_tokens=True)!r}")

    if args.check:
        cpu = AutoModelForCausalLM.from_pretrained(model_id, dtype=dtype)
        with torch.no_grad():
            ref = cpu.generate(**inputs.to("cpu"), **common)[:, prompt_len:]
        for name, new in results.items():
            same = torch.equal(ref, new)
            print(f"{name}: greedy tokens equal CPU: {same}")
            if not same:
                raise SystemExit(1)


if __name__ == "__main__":
    main()
