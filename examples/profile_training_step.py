"""Profile one training step of a small transformer on neuron, TorchNeuron style.

Writes the Chrome trace (open it in https://ui.perfetto.dev or chrome://tracing)
and, with --png, a timeline picture of it (needs matplotlib). The CPU track is
the measured host time; the neuron:0 track is the estimated Trainium time.

    python examples/profile_training_step.py --out ./neuron_profile --png step.png
"""
from __future__ import annotations

import argparse

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from torch_neuronx.profiling import NeuronConfig, NeuronProfiler, ProfileMode


class TinyLM(nn.Module):
    def __init__(self, vocab=256, dim=128, heads=4, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        block = nn.TransformerEncoderLayer(dim, heads, 4 * dim, batch_first=True, dropout=0.0)
        self.blocks = nn.TransformerEncoder(block, layers)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        return self.head(self.blocks(self.embed(tokens)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="./neuron_profile", help="profile_output_dir")
    parser.add_argument("--png", default=None, help="also render a timeline picture here")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = TinyLM().to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, 256, (4, 64), device="neuron")

    def train_step():
        with record_function("forward"):
            logits = model(tokens[:, :-1])
            loss = nn.functional.cross_entropy(logits.reshape(-1, 256), tokens[:, 1:].reshape(-1))
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        return loss

    cfg = NeuronConfig(modes=[ProfileMode.DEVICE], profile_output_dir=args.out)
    exporter = NeuronProfiler(cfg)
    # TorchNeuron's advice: warm up at least 3 iterations, synchronize before export
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
        schedule=schedule(wait=0, warmup=3, active=1, repeat=1),
        experimental_config=cfg,
        on_trace_ready=exporter.export_trace,
        record_shapes=True,
    ) as prof:
        for _ in range(4):
            train_step()
            torch.neuron.synchronize()
            prof.step()
    print(prof.key_averages().table(sort_by="device_time_total", row_limit=12))
    print("trace:", exporter.written[-1])
    if args.png:
        from torch_neuronx.profiling.timeline import render

        print("picture:", render(exporter.written[-1], args.png,
                                 title="One training step of a 2-layer transformer on neuron:0"))


if __name__ == "__main__":
    main()
