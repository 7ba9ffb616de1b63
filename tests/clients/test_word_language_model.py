"""pytorch/examples' word_language_model trains on neuron with `--accel`, losses as on CPU.

tests/clients/programs/word_language_model.py is the example's program (its command line, RNNModel,
batchify/get_batch/repackage_hidden, clip_grad_norm_, the hand-written SGD step, torch.save/torch.load of
the whole model). One interpreter per device runs its default LSTM and `--model GRU` on a tiny corpus this
test writes, with `--dropout 0`: neuron's dropout masks come from its own generator (as CUDA's do), so they
differ from CPU's for the same seed.

Losses are compared to a tolerance, not for equality: nn.LSTM/nn.GRU on neuron run the fused cells
(torch_neuronx/kernels/rnn_cells.py), which round differently from CPU's unfused layer (about 1e-7 a step),
and lr 20 (the example's default) amplifies that over the batches to at most ~1e-5.
"""
from __future__ import annotations

import math
import random

import pytest

from tests.clients import harness

MODELS = ("LSTM", "GRU")
WORDS = "the a cat dog sat on mat ran far near tree house red blue big small".split()


def _write_corpus(folder) -> None:
    rng = random.Random(0)
    for name, lines in (("train", 24), ("valid", 8), ("test", 8)):
        text = "".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))) + "\n" for _ in range(lines))
        (folder / f"{name}.txt").write_text(text)


def _argv(data, save_dir, model: str, accel: bool) -> list[str]:
    return ["--data", str(data), "--model", model, "--epochs", "1", "--emsize", "16", "--nhid", "16",
            "--batch_size", "4", "--bptt", "6", "--dropout", "0", "--log-interval", "2",
            "--save", str(save_dir / f"{model}-{'accel' if accel else 'cpu'}.pt"), *(["--accel"] if accel else [])]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    data = tmp_path_factory.mktemp("corpus")
    _write_corpus(data)
    commands = []
    for accel in (True, False):
        argv = []
        for model in MODELS:
            argv += (["+"] if argv else []) + _argv(data, data, model, accel)
        commands.append((harness.python("word_language_model.py", *argv), None))
    neuron, cpu = harness.run_all(commands)
    return {"neuron": harness.result(neuron), "cpu": harness.result(cpu), "log": neuron.stdout}


@pytest.mark.parametrize("index", range(len(MODELS)), ids=MODELS)
def test_losses_equal_cpu(runs, index):
    neuron, cpu = runs["neuron"][index], runs["cpu"][index]
    assert neuron["model"] == cpu["model"] == MODELS[index]
    assert neuron["device"] == "neuron" and cpu["device"] == "cpu"
    assert neuron["loaded_device"] == "neuron:0", "torch.load of the saved model left the neuron device"
    assert len(neuron["train"]) == len(cpu["train"]) >= 4
    assert all(math.isfinite(x) for x in neuron["train"])
    got = neuron["train"] + neuron["valid"] + [neuron["test"]]
    want = cpu["train"] + cpu["valid"] + [cpu["test"]]
    worst = max(abs(a - b) for a, b in zip(got, want))
    print(f"{MODELS[index]}: {len(got)} losses, largest |neuron - cpu| {worst:.3g}")
    # a step the neuron run skipped or got wrong would move every later loss far more than this
    assert worst < 5e-5, (worst, got, want)


def test_example_log_lines(runs):
    log = runs["log"]
    assert log.count("Using device: neuron") == len(MODELS)
    assert log.count("| end of epoch   1 |") == len(MODELS) and log.count("| End of training |") == len(MODELS)
