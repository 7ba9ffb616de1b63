"""neuronx-cc compile time of one graph, from public compile times: the one table and its fit.

Each row is a compile time someone published with the graph it compiled. The model is a power law
in the graph's work per NeuronCore, log10(seconds) = A + B * log10(FLOPs per core), fitted by least
squares over the rows whose graph size the source lets us compute (`flops_per_core`), with its
leave-one-out error: each row predicted by the fit of the others. An estimate is given only inside
the sizes the fitted rows span (a factor EXTRAPOLATION either side), with the range the
leave-one-out error gives; elsewhere, or while fewer than MIN_ROWS rows can be fitted, it is
"unknown". The fitted rows are NxD Inference's contributed models, whose READMEs give the compile
time with the configuration compiled; their FLOPs are counted with torch.utils.flop_counter, as the
compile budget counts a graph's. docs/compile-budget.md prints this table, the fit and its error:

    python -m torch_neuronx.plan._compile_time [--flops FLOPS_PER_CORE]
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
    # Where FLOPs were counted from a model: its Hugging Face config (model_type and sizes), the tokens of the
    # counted forward and the cores it was sharded over, so tests/plan/test_compile_time.py can count them again.
    model: dict | None = None
    tokens: int = 0
    cores: int = 1


_REPORTED: tuple[CompileTimeRow, ...] = (
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
    CompileTimeRow(
        "https://github.com/aws-neuron/aws-neuron-sdk/issues/1210",
        "the decode graph of Llama 3.1 8B with an ArgMax (zml, JAX-style StableHLO, bfloat16, batch 1, -O1)",
        1320.0, "=", None,
        "the issue: '~22 minutes' for the decode graph with ArgMax (21 with AwsNeuronArgMax), '~1m' without it, "
        "'~5 mins' eight months earlier; batch 1 and bfloat16 from the ArgMax operand tensor<128256x1xbf16>. Its "
        "FLOPs would be 2 x 8.0e9 parameters x 1 token / cores (1.6e10 on one core), but the issue does not say over "
        "how many NeuronCores it was sharded (zml's Llama example then sharded the KV heads over every visible "
        "device), and the time is a compiler fault's, so it stays out of the fit"),
)


# NxD Inference's contributed models: each README's "Device Profiling Metrics" names the configuration the model was
# compiled with (TP, batch 1, seq_len, bfloat16, trn1.32xlarge) and its "Compile Time". Each row is
# (directory, TP, seq_len, seconds, forward FLOPs per core, the model's Hugging Face config).
_NXDI_README = "https://github.com/aws-neuron/neuronx-distributed-inference/blob/main/contrib/models/{}/README.md"
_NXDI_HOW = (
    "the README's 'Compile Time' for compiling the model with NxD Inference in the configuration of its 'Device "
    "Profiling Metrics' (batch 1, bfloat16, trn1.32xlarge). Bucketing is off by default (NeuronConfig."
    "enable_bucketing), so that compile is two graphs: context encoding over seq_len tokens and token generation "
    "(1 token); the row is read as their sum (it may include NxD Inference's tracing to HLO, which the README "
    "does not separate). FLOPs per core: torch.utils.flop_counter over the context-encoding forward of the model built "
    "from its Hugging Face config (logits of the last token only, as NxD Inference computes them) / TP; the "
    "token-generation graph adds about 1/seq_len of that and is left out")
_NXDI_ROWS = (
    ("gpt2", 2, 128, 40.53, 1.1212e10, {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
                                         "vocab_size": 50257}),
    ("OLMo-2-0425-1B-Instruct", 2, 128, 96.43, 1.3872e11, {
        "model_type": "olmo2", "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
        "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 100352}),
    ("xglm-564M", 1, 128, 108.32, 7.9444e10, {"model_type": "xglm", "d_model": 1024, "num_layers": 24,
                                               "attention_heads": 16, "ffn_dim": 4096, "vocab_size": 256008}),
    ("Qwen3-0.6B", 2, 512, 125.38, 2.5571e11, {
        "model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
        "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
        "tie_word_embeddings": True}),
    ("c4ai-command-r7b-12-2024", 8, 2048, 167.57, 3.8486e12, {
        "model_type": "cohere2", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 256000}),
    ("stablelm-2-1_6b", 2, 128, 173.75, 1.5966e11, {
        "model_type": "stablelm", "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 24,
        "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 100352, "partial_rotary_factor": 0.25,
        "use_qkv_bias": True}),
    ("pythia-2.8b", 2, 128, 240.95, 3.2494e11, {
        "model_type": "gpt_neox", "hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 32,
        "num_attention_heads": 32, "vocab_size": 50304, "rotary_pct": 0.25}),
    ("SmolLM3-3B", 2, 128, 267.18, 3.6265e11, {
        "model_type": "smollm3", "hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
        "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 128256}),
    ("persimmon-8b-base", 8, 2048, 296.07, 4.0204e12, {
        "model_type": "persimmon", "hidden_size": 4096, "intermediate_size": 16384, "num_hidden_layers": 36,
        "num_attention_heads": 64, "vocab_size": 262144}),
    ("gemma-2b-it", 1, 512, 317.32, 2.0691e12, {
        "model_type": "gemma", "hidden_size": 2048, "intermediate_size": 16384, "num_hidden_layers": 18,
        "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 256000}),
    ("starcoder2-3b", 1, 512, 355.17, 3.0444e12, {
        "model_type": "starcoder2", "hidden_size": 3072, "intermediate_size": 12288, "num_hidden_layers": 30,
        "num_attention_heads": 24, "num_key_value_heads": 2, "vocab_size": 49152}),
    ("Llama-2-7b-hf", 2, 512, 362.0, 3.3846e12, {
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000}),
    ("OLMo-2-1124-7B", 8, 128, 369.97, 2.0841e11, {
        "model_type": "olmo2", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 100352}),
    ("Qwen2-7B-Instruct", 2, 128, 426.1, 8.3907e11, {
        "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
        "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064}),
    ("Phi-3-mini-4k-instruct", 1, 512, 834.02, 3.8141e12, {
        "model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32064}),
)


def _nxdi_row(name, tp, seq, seconds, flops_per_core, config) -> CompileTimeRow:
    graph = (f"{name}: NxD Inference's context-encoding ({seq} tokens, batch 1) and token-generation graphs, "
             f"TP {tp}, bfloat16, trn1.32xlarge")
    return CompileTimeRow(_NXDI_README.format(name), graph, seconds, "=", flops_per_core, _NXDI_HOW, config, seq, tp)


ROWS: tuple[CompileTimeRow, ...] = _REPORTED + tuple(_nxdi_row(*r) for r in _NXDI_ROWS)


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


def _main(argv=None) -> None:
    import argparse

    from ..runtime.units import markdown_table

    parser = argparse.ArgumentParser(prog="python -m torch_neuronx.plan._compile_time",
                                     description="The public neuronx-cc compile times, their fit, and an estimate.")
    parser.add_argument("--flops", type=float, default=None,
                        help="forward FLOPs per core of one graph (x3 for a training graph): print its estimate")
    args = parser.parse_args(argv)
    if args.flops is not None and not args.flops > 0:
        parser.error(f"--flops must be a positive number of FLOPs per core, got {args.flops}")
    rows, said = [], set()
    for r in ROWS:   # a reading shared by several rows is printed once
        rows.append((r.source, r.graph, f"{r.bound} {r.seconds:g}" if r.bound != "=" else f"{r.seconds:g}",
                     f"{r.flops_per_core:.3g}" if r.flops_per_core else "unknown",
                     "as above" if r.how in said else r.how))
        said.add(r.how)
    print("\n".join(markdown_table(["source", "graph", "seconds", "FLOPs per core", "how read"], rows)))
    print()
    print("fit:", status())
    if args.flops is not None:
        print(f"estimate for {args.flops:.3g} FLOPs per core:", estimate(args.flops))


if __name__ == "__main__":
    _main()
