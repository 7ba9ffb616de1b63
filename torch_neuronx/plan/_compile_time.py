"""neuronx-cc compile time of one graph, from public compile times: the one table and its fit.

Each row is a compile time someone published with the graph it compiled. The model is a power law
in the graph's work per NeuronCore, log10(seconds) = A + B * log10(FLOPs per core), fitted by least
squares over the rows whose graph size the source lets us compute (`flops_per_core`), with its
leave-one-out error: each row predicted by the fit of the others. An estimate is given only inside
the sizes the fitted rows span (a factor EXTRAPOLATION either side), with the range the
leave-one-out error gives; elsewhere, or while fewer than MIN_ROWS rows can be fitted, it is
"unknown". docs/compile-budget.md prints this table, the fit and its error:

    python -m torch_neuronx.plan._compile_time
"""
from __future__ import annotations

import math
from dataclasses import dataclass

MIN_ROWS = 3          # a two-constant fit with a leave-one-out error needs at least three rows
EXTRAPOLATION = 4.0   # how far outside the fitted sizes an estimate is still given


@dataclass(frozen=True)
class CompileTimeRow:
    source: str                   # the public page or issue, with the log
    graph: str                    # the graph compiled: model, size, sequence, batch, TP, training or not
    seconds: float                # neuronx-cc wall time for that graph, as the source's log shows it
    bound: str                    # "=" measured, ">" the compile ran longer (failed or stopped), "<" at most
    flops_per_core: float | None  # forward FLOPs per core of the graph (x3 when training), None: unknown
    how: str                      # how seconds and FLOPs were read from the source


ROWS: tuple[CompileTimeRow, ...] = (
    CompileTimeRow(
        "https://github.com/aws-neuron/aws-neuron-sdk/issues/872",
        "a small training-step graph (nn.Embedding, vocab 128, embedding_dim 256, then linear layers), trn1",
        1.9, "<", None,
        "log: neuronx-cc called at 07:13:06.297, the next graph's compile called at 07:13:08.245 after the "
        "step ran; the batch and layer sizes are not in the issue, so its FLOPs are unknown"),
    CompileTimeRow(
        "https://github.com/aws-neuron/aws-neuron-samples/issues/94",
        "one of the 7 graphs of the Stable Diffusion training sample (UNet, 512 x 512, batch 2 per device, "
        "gradient checkpointing, 32 ranks; neuron_parallel_compile, -O1, trn1)",
        174.0, "=", None,
        "log: compile called 10:43:46, 'worker 3 finished' 10:46:40; the log does not say which graph "
        "(forward+backward or an optimizer graph), so its FLOPs are unknown"),
    CompileTimeRow(
        "https://github.com/aws-neuron/aws-neuron-sdk/issues/825",
        "Llama-2-70B context encoding (transformers-neuronx), TP 24, batch 8, 2048 tokens, fp16, trn1",
        3600.0, ">", 2 * 70e9 * 8 * 2048 / 24,
        "the issue: an error 'after more than 1 hours' compilation'; FLOPs 2 x parameters x tokens / TP"),
    CompileTimeRow(
        "https://github.com/huggingface/optimum-neuron/pull/401",
        "all graphs of a Llama-2-7B fine-tuning run (optimum-neuron, TP 8, batch 1 per device, gradient "
        "checkpointing), trn1.32xlarge",
        2400.0, "=", None,
        "the tutorial's note: 'Compiling without a cache can take ~40 minutes'; several graphs together and "
        "no sequence length given, so no FLOPs per graph"),
    CompileTimeRow(
        "https://github.com/aws-neuron/transformers-neuronx/issues/48",
        "the graphs of Llama-2-7B sampling (transformers-neuronx, batch 4, n_positions 2048, fp16, -O1), TP 2 on "
        "inf2.8xlarge and TP 24 on inf2.48xlarge",
        10800.0, ">", None,
        "the issue: 'more than three hours' (batch 1 and 2: 'minutes'), a compiler fault fixed in Neuron SDK 2.15; "
        "the time covers all the run's graphs and which one was slow is not said, so no FLOPs per graph"),
    CompileTimeRow(
        "https://github.com/aws-neuron/aws-neuron-sdk/issues/646",
        "maxvit_rmlp_pico_rw_256 training graphs (timm), trn1.2xlarge",
        2700.0, ">", None,
        "the issue: 'compilation takes >45 mins each time I change the model', all graphs of the run "
        "together; batch size not given"),
)


def fit_rows(rows=ROWS) -> list[CompileTimeRow]:
    """The rows a fit can use: a measured time of a graph whose FLOPs are known."""
    return [r for r in rows if r.bound == "=" and r.flops_per_core and r.seconds > 0]


def _least_squares(points: list[tuple[float, float]]) -> tuple[float, float]:
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        raise ValueError("the rows all have the same graph size: no slope can be fitted")
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - b * mx, b


@dataclass(frozen=True)
class Fit:
    a: float                       # log10 seconds at 1 FLOP per core
    b: float                       # exponent
    loo_log10_rms: float           # leave-one-out error, RMS of log10(predicted / published)
    rows: int
    flops_range: tuple[float, float]

    def seconds(self, flops_per_core: float) -> tuple[float, float, float] | None:
        """(low, estimate, high) seconds, or None outside the fitted sizes."""
        lo, hi = self.flops_range
        if not flops_per_core or not (lo / EXTRAPOLATION <= flops_per_core <= hi * EXTRAPOLATION):
            return None
        mid = 10 ** (self.a + self.b * math.log10(flops_per_core))
        spread = 10 ** self.loo_log10_rms
        return mid / spread, mid, mid * spread


def fit(rows=ROWS) -> Fit | None:
    """The power law over the usable rows with its leave-one-out error; None below MIN_ROWS rows."""
    usable = fit_rows(rows)
    if len(usable) < MIN_ROWS:
        return None
    points = [(math.log10(r.flops_per_core), math.log10(r.seconds)) for r in usable]
    a, b = _least_squares(points)
    errors = []
    for i, (x, y) in enumerate(points):
        ai, bi = _least_squares(points[:i] + points[i + 1:])
        errors.append((ai + bi * x) - y)
    rms = math.sqrt(sum(e * e for e in errors) / len(errors))
    sizes = [r.flops_per_core for r in usable]
    return Fit(a, b, rms, len(usable), (min(sizes), max(sizes)))


def status() -> str:
    """One line: the fit and its error, or why there is none."""
    f = fit()
    if f is None:
        return (f"unknown: {len(fit_rows())} of the {len(ROWS)} public compile times name a graph whose size can "
                f"be computed ({MIN_ROWS} needed for a fit with a leave-one-out error)")
    return (f"seconds = 10^{f.a:.3f} x (FLOPs per core)^{f.b:.3f} over {f.rows} rows; leave-one-out error "
            f"x{10 ** f.loo_log10_rms:.2f}")


def estimate(flops_per_core: float | None) -> dict:
    """{'low_s', 'estimate_s', 'high_s'} or {'unknown': why} for one graph."""
    if not flops_per_core:
        return {"unknown": "the graph's FLOPs are unknown"}
    f = fit()
    if f is None:
        return {"unknown": "no fit: too few public compile times of a graph of known size (docs/compile-budget.md)"}
    got = f.seconds(flops_per_core)
    if got is None:
        return {"unknown": "outside the graph sizes of the public compile times"}
    low, mid, high = got
    return {"low_s": low, "estimate_s": mid, "high_s": high}


def _main() -> None:
    from ..runtime.units import markdown_table

    print("\n".join(markdown_table(["source", "graph", "seconds", "FLOPs per core", "how read"], [
        (r.source, r.graph, f"{r.bound} {r.seconds:g}" if r.bound != "=" else f"{r.seconds:g}",
         f"{r.flops_per_core:.3g}" if r.flops_per_core else "unknown", r.how) for r in ROWS])))
    print()
    print("fit:", status())


if __name__ == "__main__":
    _main()
