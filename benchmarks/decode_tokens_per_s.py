"""Greedy decode tokens/s of a small Llama-style model (hidden 256, 4 layers) through transformers'
generate(), four ways in one run: neuron eager (dynamic cache), neuron static cache with the decode step
compiled by transformers with backend "neuron", CPU eager, and CPU static cache compiled with Inductor.

Decode time = time(generate N+1 new tokens) - time(generate 1 new token), so prefill is excluded.
Variants are interleaved over rounds (the order flips every round, the machine may be shared); each
ratio is the median over rounds of the per-round ratio, tokens/s the median over rounds.
Targets: compiled neuron >= 2x eager neuron, and within 15% of Inductor on CPU. Prints
ratios and PASS/MISS; never asserts.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
from transformers import AutoModelForCausalLM, CompileConfig, LlamaConfig


def build(args):
    cfg = LlamaConfig(vocab_size=1024, hidden_size=args.hidden, intermediate_size=4 * args.hidden,
                      num_hidden_layers=args.layers, num_attention_heads=4, num_key_value_heads=4,
                      max_position_embeddings=1024, tie_word_embeddings=False)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(cfg).eval()


def run(model, ids, new_tokens, static, compile_all=False):
    kwargs = dict(do_sample=False, min_new_tokens=new_tokens, max_new_tokens=new_tokens, pad_token_id=0)
    if static:
        kwargs["cache_implementation"] = "static"
        kwargs["cache_config"] = {"max_cache_len": ids.shape[1] + 160}  # same cache shape for every call
        if compile_all:  # transformers only auto-compiles on accelerators; ask for it on CPU with Inductor
            cc = CompileConfig(backend="inductor", fullgraph=False, dynamic=False, mode="default")
            cc._compile_all_devices = True
            kwargs["compile_config"] = cc
    with torch.no_grad():
        t0 = time.perf_counter()
        out = model.generate(ids, **kwargs)
        if ids.device.type == "neuron":
            torch.neuron.synchronize()
        return time.perf_counter() - t0, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--prompt", type=int, default=32)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    cpu_model = build(args)
    dev_model = build(args).to("neuron")
    ids = torch.randint(1, 1024, (1, args.prompt), generator=torch.Generator().manual_seed(0))
    variants = {
        "neuron eager": (dev_model, ids.to("neuron"), False, False),
        "neuron compiled (static)": (dev_model, ids.to("neuron"), True, False),
        "cpu eager": (cpu_model, ids, False, False),
        "cpu inductor (static)": (cpu_model, ids, True, True),
    }
    outputs, times = {}, {k: [] for k in variants}
    for name, (m, x, static, ca) in variants.items():  # warm-up: compiles both generate lengths
        t_warm = time.perf_counter()
        run(m, x, 1, static, ca)
        _, outputs[name] = run(m, x, args.tokens + 1, static, ca)
        print(f"warm-up {name}: {time.perf_counter() - t_warm:.1f} s", flush=True)
    for r in range(args.rounds):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        for name in order:
            m, x, static, ca = variants[name]
            t_short, _ = run(m, x, 1, static, ca)
            t_long, _ = run(m, x, args.tokens + 1, static, ca)
            times[name].append(max(t_long - t_short, 1e-9))
    tps = {k: args.tokens / statistics.median(v) for k, v in times.items()}

    def speed_ratio(a, b):  # tokens/s of a over b, median of the per-round ratios
        return statistics.median(tb / ta for ta, tb in zip(times[a], times[b]))

    ref = outputs["cpu eager"].cpu()
    print(f"\nLlama-style hidden {args.hidden}, {args.layers} layers, prompt {args.prompt}, {args.tokens} decode "
          f"tokens, batch 1, torch threads {torch.get_num_threads()}")
    for k, v in tps.items():
        same = torch.equal(outputs[k].cpu(), ref)
        print(f"  {k:<26} {v:8.1f} tokens/s   greedy tokens equal CPU eager: {same}")
    r1 = speed_ratio("neuron compiled (static)", "neuron eager")
    r2 = speed_ratio("neuron compiled (static)", "cpu inductor (static)")
    print(f"\ncompiled neuron / eager neuron   = {r1:.2f}x  (target >= 2.0x)  {'PASS' if r1 >= 2.0 else 'MISS'}")
    print(f"compiled neuron / inductor CPU   = {r2:.2f}x  (target >= 0.85x) {'PASS' if r2 >= 0.85 else 'MISS'}")
    print(f"eager neuron / eager CPU         = {speed_ratio('neuron eager', 'cpu eager'):.2f}x")
    print(f"inductor CPU / eager CPU         = {speed_ratio('cpu inductor (static)', 'cpu eager'):.2f}x "
          "(what compiling gains on CPU itself)")
    print(f"inductor CPU / eager neuron      = {speed_ratio('cpu inductor (static)', 'neuron eager'):.2f}x "
          "(compiled / eager neuron if the neuron program ran exactly as fast as Inductor's CPU program)")


if __name__ == "__main__":
    main()
