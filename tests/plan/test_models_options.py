"""The options objects of plan train / generate / sweep (plan/models/_options.py): built once from the
command line, frozen, checked with messages that name the flag, and written back as the same command
line (how a plan runs itself in a child with its instance's environment)."""
from __future__ import annotations

import argparse
import dataclasses

import pytest

from torch_neuronx.plan.models import _cli as cli, _sweep as sweep
from torch_neuronx.plan.models._layout import make_layout
from torch_neuronx.plan.models._options import GenerateOptions, OptionsError, SweepOptions, TrainOptions


def _parse(add_arguments, argv):
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(argv)


TRAIN = ["--config", "cfg", "--instance", "trn2.48xlarge", "--lnc", "2", "--nodes", "2", "--tp", "4", "--fsdp", "8",
         "--zero1", "--micro-batch", "2", "--global-batch", "64", "--seq-len", "4096", "--gradient-checkpointing",
         "--json", "out.json", "--quiet", "--pp", "2", "--pp-schedule", "interleaved"]
GENERATE = ["--config", "cfg", "--instance", "trn2.48xlarge", "--tp", "32", "--batch", "1", "--concurrency", "8",
            "--buckets", "128,512,2048", "--max-model-len", "4096", "--full-depth", "--html", "g.html", "-v",
            "--dtype", "float16", "--real"]


@pytest.mark.parametrize("cls, add_arguments, argv", [
    (TrainOptions, cli.add_train_arguments, TRAIN[:-4] + ["--fsdp", "1", "--dp", "32"]),   # ZeRO-1 needs FSDP 1
    (TrainOptions, cli.add_train_arguments, [a for a in TRAIN if a != "--zero1"]),
    (TrainOptions, cli.add_train_arguments, ["--config", "cfg"]),                           # every default
    (TrainOptions, cli.add_train_arguments, ["--config", "cfg", "--tp", "8", "--no-sequence-parallel"]),
    (TrainOptions, cli.add_train_arguments, ["--config", "cfg", "--tp", "4", "--cp", "4", "--fsdp", "2"]),
    (GenerateOptions, cli.add_generate_arguments, GENERATE),
    (GenerateOptions, cli.add_generate_arguments, ["--config", "cfg", "--mode", "eager", "--compile"]),
])
def test_the_command_line_of_the_options_gives_them_back(cls, add_arguments, argv):
    opts = cls.from_args(_parse(add_arguments, argv))
    line = opts.argv()
    assert line[0] == cls.COMMAND
    again = cls.from_args(_parse(add_arguments, line[1:]))
    assert again == opts and again.layout == opts.layout


def test_options_are_frozen_and_carry_their_layout():
    opts = TrainOptions.from_args(_parse(cli.add_train_arguments, TRAIN[:-4] + ["--fsdp", "1", "--dp", "32"]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.tp = 8
    assert opts.layout == make_layout("trn2.48xlarge", 2, 2, 4, 1, 32)
    assert (opts.layout.world_size, opts.dry_run) == (128, True)
    gen = GenerateOptions.from_args(_parse(cli.add_generate_arguments, GENERATE))
    assert gen.buckets == [128, 512, 2048] and gen.dry_run is False and gen.layout.dp == 2   # 64 cores / TP 32


@pytest.mark.parametrize("cls, add_arguments, argv, message", [
    (TrainOptions, cli.add_train_arguments, ["--fsdp", "2", "--zero1"], "--zero1 with --fsdp 2"),
    (TrainOptions, cli.add_train_arguments, ["--tp", "5"], "5 x 1 x 1 = 5 does not divide the 64"),
    (TrainOptions, cli.add_train_arguments, ["--instance", "nope.xlarge"], "--instance 'nope.xlarge' is not a known"),
    (TrainOptions, cli.add_train_arguments, ["--pp", "2", "--pp-schedule", "zigzag"], "zigzag"),
    (TrainOptions, cli.add_train_arguments, ["--cp", "4", "--seq-len", "100"],
     "--seq-len 100 must be a multiple of 2 x --cp = 8: the load-balanced ring"),
    (TrainOptions, cli.add_train_arguments, ["--cp", "2", "--dp", "32", "--zero1"], "--zero1 with --cp 2"),
    (TrainOptions, cli.add_train_arguments, ["--cp", "2", "--pp", "2"], "--cp 2 is planned with --tp, --fsdp and --dp"),
    (TrainOptions, cli.add_train_arguments, ["--cp", "0"], "--cp must be a positive integer"),
    (TrainOptions, cli.add_train_arguments, ["--cp", "3"], "TP x CP x FSDP x PP = 1 x 3 x 1 x 1 = 3 does not divide"),
    (GenerateOptions, cli.add_generate_arguments, ["--mode", "eager", "--buckets", "128"], "--buckets plans the deployed"),
    (GenerateOptions, cli.add_generate_arguments, ["--output-tokens", "0"], "--output-tokens must be a positive"),
    (GenerateOptions, cli.add_generate_arguments, ["--lnc", "3"], "--lnc 3 is not supported"),
])
def test_a_bad_combination_stops_with_the_flag_named(cls, add_arguments, argv, message):
    with pytest.raises(OptionsError, match=message.replace("(", r"\(")):
        cls.from_args(_parse(add_arguments, ["--config", "cfg", *argv]))


def test_a_bad_combination_exits_2_before_anything_runs(capsys):
    from torch_neuronx.plan.__main__ import main

    with pytest.raises(SystemExit) as stop:
        main(["train", "--config", "no/such/folder", "--tp", "5"])     # the flags, before the config is read
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m torch_neuronx.plan train: error: TP x FSDP x PP = 5 x 1 x 1") and "no/such" not in err


def test_sweep_options_hold_the_lists():
    opts = SweepOptions.from_args(_parse(sweep.add_arguments, ["--config", "cfg", "--tp", "4,8", "--lnc", "1,2",
                                                               "--in-process"]))
    assert (opts.tp, opts.lnc, opts.instances, opts.in_process) == ([4, 8], [1, 2], ["trn2.48xlarge", "trn3.48xlarge"],
                                                                    True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.tp = [1]
