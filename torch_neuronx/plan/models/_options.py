"""The options of the model-level commands: one frozen object per command (`plan train`,
`plan generate`, `plan sweep`), built from its parsed command line (_cli.py and _sweep.py define the
flags and their defaults) and checked once, then passed down. A combination that cannot work stops
here, before torch, transformers or a model is touched, with `OptionsError` naming the flag and the
fix; `python -m torch_neuronx.plan` prints it as `<command>: error: <message>` and exits with 2.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, fields

from ._layout import LayoutError, make_layout


class OptionsError(ValueError):
    """Flags that cannot work together; the message names the flag and says what to choose."""


def _from_args(cls, args: argparse.Namespace):
    """`cls` from the parsed flags of its command (the Namespace has one attribute per field)."""
    return cls(**{f.name: vars(args)[f.name] for f in fields(cls)})


def _check_routing(spec: str | None) -> None:
    from ._routing import parse

    try:
        parse(spec)
    except ValueError as err:
        raise OptionsError(str(err)) from None


@dataclass(frozen=True)
class _Plan:
    """What `generate` and `train` share (_cli.py's `_common` flags). `layout` (not a field: derived
    from the fields when they are checked) is the Layout of the sizes, from make_layout."""
    config: str
    instance: str
    lnc: int | None
    nodes: int
    tp: int
    dtype: str
    json: str | None
    real: bool
    html: str | None
    quiet: bool
    verbose: bool

    COMMAND = ""

    from_args = classmethod(_from_args)

    @property
    def dry_run(self) -> bool:
        return not self.real

    def argv(self) -> list[str]:
        """The command line of these options (`python -m torch_neuronx.plan` + this gives them back):
        how the plan runs itself in a child with its instance's environment."""
        out = [self.COMMAND]
        for f in fields(self):
            value, flag = getattr(self, f.name), "--" + f.name.replace("_", "-")
            if value is False and f.default is True:   # an on-by-default switch turned off
                out.append("--no-" + f.name.replace("_", "-"))
                continue
            if value is None or value is False:
                continue
            if value is True:
                out.append(flag)
            elif isinstance(value, (list, tuple)):
                out += [flag, ",".join(map(str, value))]
            else:
                out += [flag, str(value)]
        return out

    def _check_layout(self, **parallel) -> None:
        try:
            layout = make_layout(self.instance, self.lnc, self.nodes, self.tp, **parallel)
        except LayoutError as err:
            raise OptionsError(str(err)) from None
        object.__setattr__(self, "layout", layout)   # derived once, not a field (eq, argv)


@dataclass(frozen=True)
class TrainOptions(_Plan):
    pp: int
    pp_schedule: str
    pp_chunks: int | None
    ep: int
    fsdp: int
    dp: int | None
    zero1: bool
    micro_batch: int
    global_batch: int | None
    seq_len: int
    gradient_checkpointing: bool
    sequence_parallel: bool = True   # with TP, as NxD Training runs it (_cli.py: --no-sequence-parallel)
    cp: int = 1                      # context parallelism (_context_parallel.py)
    routing: str | None = None       # MoE: where the routers send tokens (_routing.py; default balanced)
    task: str = "auto"               # _tasks.py
    activation_recompute: str | None = None   # none | full | selective (_recompute.py)
    make_vocab_size_divisible_by: int | None = None   # Megatron's flag (_build.training_vocab_multiple)
    torch_compile: bool = False      # _train_compile.py

    COMMAND = "train"

    def __post_init__(self) -> None:
        _check_routing(self.routing)
        from ._recompute import MODES
        from ._tasks import TASKS

        if self.task not in TASKS:
            raise OptionsError(f"--task {self.task!r} is not a task plan train runs; use one of: {', '.join(TASKS)}")
        if self.activation_recompute is not None and self.activation_recompute not in MODES:
            raise OptionsError(f"--activation-recompute {self.activation_recompute!r} is not a recomputation mode; "
                               f"use one of: {', '.join(MODES)}")
        if self.gradient_checkpointing and self.activation_recompute not in (None, "full"):
            raise OptionsError(f"--gradient-checkpointing is --activation-recompute full, but "
                               f"--activation-recompute {self.activation_recompute} was given too; pass one of them")
        if self.make_vocab_size_divisible_by is not None and self.make_vocab_size_divisible_by < 1:
            raise OptionsError(f"--make-vocab-size-divisible-by must be a positive integer, got "
                               f"{self.make_vocab_size_divisible_by}")
        if self.zero1 and self.fsdp > 1:
            from ._train import zero1_check

            try:
                zero1_check(self.tp, self.fsdp)
            except ValueError as err:
                raise OptionsError(str(err)) from None
        self._check_layout(fsdp=self.fsdp, dp=self.dp, pp=self.pp, pp_schedule=self.pp_schedule,
                           pp_chunks=self.pp_chunks, ep=self.ep, cp=self.cp)
        from ._context_parallel import check

        try:
            check(self.layout, self.seq_len, self.zero1)
        except ValueError as err:
            raise OptionsError(str(err)) from None


@dataclass(frozen=True)
class GenerateOptions(_Plan):
    batch: int
    input_tokens: int
    output_tokens: int
    prefill_chunk_size: int | None
    compile: bool
    mode: str
    concurrency: int | None
    max_model_len: int | None
    buckets: list | None
    full_depth: bool
    sequence_parallel: bool = False   # deployed: the CTE sequence-parallel (_cli_deployed.py)
    routing: str | None = None        # MoE: where the routers send tokens (_routing.py; default balanced)
    decode_batch: int | None = None   # deployed: the compiled decode batch, live sequences padded to it
    ep: int = 1                       # deployed, MoE: experts split over EP groups within the TP group

    COMMAND = "generate"

    def __post_init__(self) -> None:
        _check_routing(self.routing)
        if self.mode == "deployed":
            from ._deployed import check_arguments

            try:
                check_arguments(self.batch, self.concurrency, self.input_tokens, self.output_tokens,
                                self.prefill_chunk_size, self.max_model_len, self.buckets, self.decode_batch)
            except ValueError as err:
                raise OptionsError(str(err)) from None
        else:
            from ._cli_deployed import eager_flag_error

            if eager_flag_error(self):
                raise OptionsError(eager_flag_error(self))
        self._check_layout()
        if self.ep != 1:
            from ._layout import serving_expert_parallel

            try:
                object.__setattr__(self, "layout", serving_expert_parallel(self.layout, self.ep))
            except LayoutError as err:
                raise OptionsError(str(err)) from None


@dataclass(frozen=True)
class SweepOptions:
    """`plan sweep`: lists of sizes, one training plan per combination."""
    config: str
    instances: list
    lnc: list
    nodes: int
    tp: list
    cp: list
    fsdp: list
    micro_batch: list
    global_batch: int | None
    seq_len: list
    gradient_checkpointing: list
    dtype: str
    real: bool
    in_process: bool
    row_timeout: float
    json: str | None
    html: str | None
    quiet: bool
    verbose: bool

    from_args = classmethod(_from_args)
