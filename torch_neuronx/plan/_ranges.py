"""Calibrated ranges: how far a planned figure may be from what Trainium measures, read from the
calibration table's residuals for that kind of workload.

A row's residual is log(planned / published) as times (a rate's residual is log(published /
planned)), planned with the default assumptions, as every plan is. Rows fall into kinds: dense or
MoE model, x train (a training step), prefill (TTFT: the context encoding) or decode (TPOT: one
token step), x the software stack that published the figure (NxD Training, NxD Inference,
Transformers NeuronX, optimum-neuron). A plan's figure gets the range of its kind's residuals.

The rule, for a kind with n rows (residuals sorted r(1) <= ... <= r(n)):
- n >= CONFIDENT_ROWS: the interval [r(j), r(n + 1 - j)] with j = floor((1 - COVERAGE) / 2 x (n + 1)).
  For a new row of the same kind, exchangeable with the n (the split-conformal argument), the
  chance it lands inside is (n + 1 - 2j) / (n + 1) >= COVERAGE, and no pair of order statistics
  closer together promises that: the range is no wider than it must be. CONFIDENT_ROWS = 9 is the
  fewest rows for which j >= 1 (with fewer, even [min, max] promises (n - 1) / (n + 1) < 80%).
- fewer rows ("few rows", said so in every report that uses it): the hull of the kind's own
  residuals and the interval of a pool (the same stack's rows of every kind when they are
  CONFIDENT_ROWS or more, else every row), widened by WIDEN each way: a wide range, not a confident one.
- no row at all: the pool's interval, widened the same way.

Coverage, as the calibration command reports it: the share of a kind's rows whose residual falls
inside the range computed by the same rule from the table without that row (leave-one-out).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

COVERAGE = 0.8          # the share of future rows a range aims to hold
CONFIDENT_ROWS = 9      # fewest rows whose order statistics bound a COVERAGE interval (see above)
WIDEN = 1.25            # a few-rows range is widened by this factor each way (the table's own tolerance)

# what the calibration command writes and plans read: per kind of workload, its range
RANGES = Path(__file__).resolve().parent / "calibration" / "ranges.json"

PHASES = {"ttft_ms": "prefill", "tpot_ms": "decode", "sequences_per_s": "train"}
# the stack of a row, from its `release` text (calibration/published.csv); first match wins
STACKS = (("NxD Training", "nxd-training"), ("NxD,", "nxd-training"), ("NxD Inference", "nxd-inference"),
          ("Transformers NeuronX", "transformers-neuronx"), ("optimum-neuron", "optimum-neuron"))


@dataclass(frozen=True)
class Kind:
    arch: str      # "dense" or "moe"
    phase: str     # "train", "prefill" or "decode"
    stack: str     # see STACKS; "" where no calibrated stack runs the plan

    @property
    def key(self) -> str:
        return f"{self.arch}/{self.phase}/{self.stack or 'none'}"

    @classmethod
    def parse(cls, key: str) -> Kind:
        arch, phase, stack = key.split("/")
        return cls(arch, phase, "" if stack == "none" else stack)


def stack_of(release: str) -> str:
    """The software stack of a calibration row, from its release text ('' when none matches)."""
    for needle, stack in STACKS:
        if needle in release:
            return stack
    return ""


def is_moe(config: dict) -> bool:
    """Does a model config (config.json figures) route tokens to experts?"""
    text = config.get("text_config") or config
    return any((text.get(k) or 0) > 1 for k in ("num_experts", "num_local_experts", "n_routed_experts"))


@dataclass(frozen=True)
class Range:
    low: float          # residual bounds, log(planned / actual) as times
    high: float
    rows: tuple         # the ids of the kind's own rows
    pooled: str         # "" for a confident range; else what it was pooled from ("stack optimum-neuron", "all rows")
    note: str           # the rule, in words, for the report

    def time_bounds(self, planned: float) -> tuple[float, float]:
        """[low, high] of an actual time, given the planned one."""
        return planned / math.exp(self.high), planned / math.exp(self.low)

    def rate_bounds(self, planned: float) -> tuple[float, float]:
        """[low, high] of an actual rate, given the planned one."""
        return planned * math.exp(self.low), planned * math.exp(self.high)

    def to_json(self) -> dict:
        return {"residual_low": self.low, "residual_high": self.high, "rows": list(self.rows),
                "pooled": self.pooled, "note": self.note}

    @classmethod
    def from_json(cls, d: dict) -> Range:
        return cls(d["residual_low"], d["residual_high"], tuple(d["rows"]), d["pooled"], d["note"])


def order_interval(residuals: list[float], coverage: float = COVERAGE) -> tuple[float, float] | None:
    """[r(j), r(n + 1 - j)] with j = floor((1 - coverage) / 2 x (n + 1)); None when j < 1 (too few rows)."""
    r = sorted(residuals)
    j = math.floor((1.0 - coverage) / 2.0 * (len(r) + 1) + 1e-9)
    if j < 1:
        return None
    return r[j - 1], r[len(r) - j]


def range_for(kind: Kind, table: dict[str, tuple[Kind, float]]) -> Range:
    """The range of `kind` from `table` ({row id: (its kind, its residual)}), by the module's rule."""
    own = {i: r for i, (k, r) in table.items() if k == kind}
    confident = order_interval(list(own.values())) if len(own) >= CONFIDENT_ROWS else None
    if confident is not None:
        return Range(*confident, tuple(sorted(own)), "",
                     f"{len(own)} rows of this kind: the range holds a new row of it with chance >= {COVERAGE:.0%}")
    stack = [r for k, r in table.values() if k.stack == kind.stack and kind.stack]
    pool, name = (stack, f"stack {kind.stack}") if len(stack) >= CONFIDENT_ROWS else ([r for _, r in table.values()], "all rows")
    interval = order_interval(pool)
    if interval is None:
        raise ValueError(f"the calibration table has {len(pool)} compared rows; a range needs {CONFIDENT_ROWS} or more")
    low, high = min([interval[0], *own.values()]), max([interval[1], *own.values()])
    widen = math.log(WIDEN)
    return Range(low - widen, high + widen, tuple(sorted(own)), name,
                 f"few rows: {len(own)} of this kind ({CONFIDENT_ROWS} needed), so the range is that of {name} "
                 f"with this kind's own rows, widened {WIDEN}x each way")


def coverage(table: dict[str, tuple[Kind, float]]) -> dict[str, dict]:
    """Per kind: its rows, how many fall inside the range computed without them (leave-one-out), the
    share, and the median width of those ranges (high / low as a factor)."""
    out: dict[str, dict] = {}
    for kind in sorted({k for k, _ in table.values()}, key=lambda k: k.key):
        ids = sorted(i for i, (k, _) in table.items() if k == kind)
        inside, widths = 0, []
        for i in ids:
            rest = {j: v for j, v in table.items() if j != i}
            rng = range_for(kind, rest)
            inside += rng.low - 1e-12 <= table[i][1] <= rng.high + 1e-12
            widths.append(math.exp(rng.high - rng.low))
        widths.sort()
        out[kind.key] = {"rows": len(ids), "inside": inside, "coverage": inside / len(ids),
                         "median_width": widths[len(widths) // 2] if len(widths) % 2 else
                         (widths[len(widths) // 2 - 1] + widths[len(widths) // 2]) / 2,
                         "few_rows": len(ids) < CONFIDENT_ROWS}
    return out


def ranges_table(table: dict[str, tuple[Kind, float]]) -> dict:
    """What the calibration command writes (calibration/ranges.json) and plans read: the range of
    every kind with rows, the pools a kind without rows falls back to, and the leave-one-out coverage."""
    kinds = {k for k, _ in table.values()}
    stacks = {k.stack for k in kinds if k.stack}
    # a kind without rows (another arch or phase on a calibrated stack, or no stack) gets its pool's range
    fallbacks = {Kind(a, p, s) for a in ("dense", "moe") for p in ("train", "prefill", "decode")
                 for s in (*stacks, "")} - kinds
    return {"coverage_goal": COVERAGE, "confident_rows": CONFIDENT_ROWS, "widen": WIDEN,
            "kinds": {k.key: range_for(k, table).to_json() for k in sorted(kinds | fallbacks, key=lambda k: k.key)},
            "coverage": coverage(table)}
