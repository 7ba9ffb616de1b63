"""Training tokens/s of the tiny-model SFT step, four ways in one run: neuron eager, neuron compiled
(torch.compile backend "neuron", dynamic=False, as the Trainer asks for with --torch_compile true), CPU eager,
and CPU compiled with Inductor.

What is timed: the training step itself, not the whole Trainer: forward with labels (causal-LM loss),
backward, AdamW step and zero_grad on one packed batch [batch, 128] (TRL's "wrapped" packing gives full
rows, so every step has this one shape). The model is the SFT example's tiny Qwen3 (examples/sft_tiny_assets.py:
hidden 64, 2 layers, its tokenizer's vocabulary), fp32, built with the same seed for every side; the model
is compiled, the optimizer step stays eager, as in the Trainer. After warm-up (which includes the
compiles), sides are interleaved over rounds (the order flips every round: the machine may be shared); a
round times `--steps` steps per side; tokens/s is the median over rounds, each ratio the median of the
per-round ratios. Targets: compiled neuron >= 1.2x eager neuron, and compiled neuron time /
Inductor CPU time <= 1.10. Prints figures and PASS/MISS; never asserts.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
torch._dynamo.config.automatic_dynamic_shapes = False  # as the SFT example: static graphs only


def build_model(device: str):
    from sft_tiny_assets import QWEN3_TINY
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from torch_neuronx.integrations.tiny_models import build_tokenizer

    tok = build_tokenizer()
    config = Qwen3Config(vocab_size=len(tok), pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                         eos_token_id=tok.eos_token_id, **QWEN3_TINY)
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config).to(device).train()
    return model, len(tok)


class Side:
    """One (device, compile) combination: its own model copy, optimizer and packed batch."""

    def __init__(self, device: str, backend: str | None, batch: int, seq: int):
        self.device = device
        self.model, vocab = build_model(device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (batch, seq), generator=g).to(device)
        self.forward = torch.compile(self.model, backend=backend, dynamic=False) if backend else self.model
        self.losses: list[float] = []

    def step(self) -> torch.Tensor:
        loss = self.forward(input_ids=self.ids, labels=self.ids).loss
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss

    def run(self, steps: int) -> float:
        t0 = time.perf_counter()
        for _ in range(steps):
            loss = self.step()
        self.losses.append(loss.item())  # .item() waits for the device, so the time is complete
        if self.device == "neuron":
            torch.neuron.synchronize()
        return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=2, help="packed rows per step (the SFT tests use 2)")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=5, help="timed steps per side per round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    sides = {}
    for name, device, backend in (("neuron eager", "neuron", None), ("neuron compiled", "neuron", "neuron"),
                                  ("cpu eager", "cpu", None), ("cpu inductor", "cpu", "inductor")):
        t0 = time.perf_counter()
        sides[name] = side = Side(device, backend, args.batch, args.seq)
        side.run(args.warmup)
        print(f"warm-up {name}: {time.perf_counter() - t0:.1f} s ({args.warmup} steps, compile included)",
              flush=True)
    times = {k: [] for k in sides}
    for r in range(args.rounds):
        for name in (list(sides) if r % 2 == 0 else list(reversed(sides))):
            times[name].append(sides[name].run(args.steps))

    tokens = args.batch * args.seq * args.steps
    tps = {k: tokens / statistics.median(v) for k, v in times.items()}

    def speed(a: str, b: str) -> float:  # tokens/s of a over tokens/s of b, median of per-round ratios
        return statistics.median(tb / ta for ta, tb in zip(times[a], times[b]))

    print(f"\ntiny Qwen3 SFT step (fwd+bwd+AdamW), packed batch [{args.batch}, {args.seq}], fp32, "
          f"{args.steps} steps x {args.rounds} rounds per side, torch threads {torch.get_num_threads()}")
    ref = sides["cpu eager"].losses
    for k, v in tps.items():
        drift = max(abs(a - b) for a, b in zip(sides[k].losses, ref))
        print(f"  {k:<16} {v:9.0f} tokens/s   {1e3 * statistics.median(times[k]) / args.steps:7.2f} ms/step   "
              f"max |loss - cpu eager| {drift:.2e}")
    r1 = speed("neuron compiled", "neuron eager")
    r2 = 1.0 / speed("neuron compiled", "cpu inductor")  # time ratio: compiled neuron / inductor CPU
    print(f"\ncompiled neuron / eager neuron (speed)   = {r1:.2f}x  (target >= 1.2x)   {'PASS' if r1 >= 1.2 else 'MISS'}")
    print(f"compiled neuron / inductor CPU (time)    = {r2:.2f}   (target <= 1.10)  {'PASS' if r2 <= 1.10 else 'MISS'}")
    print(f"eager neuron / eager CPU (speed)         = {speed('neuron eager', 'cpu eager'):.2f}x")
    print(f"inductor CPU / eager CPU (speed)         = {speed('cpu inductor', 'cpu eager'):.2f}x "
          "(what compiling gains on CPU itself)")


if __name__ == "__main__":
    main()
