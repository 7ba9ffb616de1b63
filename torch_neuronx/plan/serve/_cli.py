"""`python -m torch_neuronx.plan serve`: plan a vLLM deployment with vLLM's own scheduler.

    python -m torch_neuronx.plan serve --config CONFIG.json --instance trn2.48xlarge --tp 64 \\
        --max-num-seqs 8 --max-model-len 4096 --num-prompts 200 --input-tokens 1500 --output-tokens 250 \\
        --request-rate 4 --json plan.json --html plan.html

vLLM is not a dependency of the main environment (it pins its own transformers): the command runs in
vLLM's environment (docs/serving.md) and says how to get it elsewhere. Like the other model-level
plans it runs in a process whose neuron runtime is the instance's, with phantom device memory.
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
from dataclasses import dataclass

from .. import _command as command
from .._wording import figure as fmt, plural
from .._report_ranges import text as range_text
from ..models._options import OptionsError, _Plan

PROG = "python -m torch_neuronx.plan serve"
NO_VLLM = ("plan serve drives vLLM's own scheduler, and vLLM is not installed in this environment "
           f"({sys.executable}). Make vLLM's environment as docs/serving.md says (its own virtual environment: "
           "`python -m venv .venv-vllm`, then `pip install -e \".[vllm]\"` into it with torch==2.13.0+cpu) and run "
           "`.venv-vllm/bin/python -m torch_neuronx.plan serve ...`")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..models._cli import DTYPES

    p.add_argument("--config", required=True, help="a transformers config.json (or its folder)")
    p.add_argument("--instance", default="trn2.48xlarge", help="instance type, e.g. trn2.48xlarge")
    p.add_argument("--lnc", type=int, default=None, help="logical NeuronCore size 1 or 2 (default: the chip's)")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree (vLLM's --tensor-parallel-size)")
    p.add_argument("--nodes", type=int, default=1, help=argparse.SUPPRESS)   # one TP group serves: one instance
    p.add_argument("--dtype", choices=DTYPES, default="bfloat16")
    p.add_argument("--max-num-seqs", type=int, default=None, help="vLLM's --max-num-seqs (default 256: vLLM's server default for an accelerator under 70 GiB)")
    p.add_argument("--max-model-len", type=int, default=None,
                   help="vLLM's --max-model-len (default: vLLM's, the config's context length)")
    p.add_argument("--max-num-batched-tokens", type=int, default=None,
                   help="vLLM's --max-num-batched-tokens (default 2048: vLLM's server default for an accelerator under 70 GiB)")
    p.add_argument("--block-size", type=int, default=None, help="vLLM's KV-cache --block-size (default: vLLM's)")
    p.add_argument("--gpu-memory-utilization", type=float, default=None,
                   help="vLLM's share of a core's memory for the model and KV cache (default: vLLM's)")
    p.add_argument("--num-prompts", type=int, default=None, help="requests to send (default 200, or the dataset's)")
    p.add_argument("--input-tokens", type=int, default=1500, help="prompt tokens of every request")
    p.add_argument("--output-tokens", type=int, default=250, help="output tokens of every request")
    p.add_argument("--dataset", default=None,
                   help='JSON lines, one request each: {"input_tokens": N, "output_tokens": M}')
    p.add_argument("--request-rate", type=float, default=math.inf,
                   help="requests/s as vllm bench serve sends them (default inf: all at once)")
    p.add_argument("--burstiness", type=float, default=1.0, help="bench serve's: 1 Poisson, else gamma shape")
    p.add_argument("--max-concurrency", type=int, default=None,
                   help="at most this many requests in flight (bench serve's client slots)")
    p.add_argument("--seed", type=int, default=0, help="arrivals and prompt tokens (bench serve's --seed)")
    p.add_argument("--routing", default=None, help="MoE configs: balanced (default), skewed=S or a JSON histogram")
    p.add_argument("--json", help="write the report here")
    p.add_argument("--real", action="store_true", help="allocate for real instead of phantom memory (tiny configs)")
    command.add_view_arguments(p)


@dataclass(frozen=True)
class ServeOptions(_Plan):
    max_num_seqs: int | None
    max_model_len: int | None
    max_num_batched_tokens: int | None
    block_size: int | None
    gpu_memory_utilization: float | None
    num_prompts: int | None
    input_tokens: int
    output_tokens: int
    dataset: str | None
    request_rate: float
    burstiness: float
    max_concurrency: int | None
    seed: int
    routing: str | None = None

    COMMAND = "serve"

    def __post_init__(self) -> None:
        for flag, value in (("--max-num-seqs", self.max_num_seqs), ("--max-model-len", self.max_model_len),
                            ("--max-num-batched-tokens", self.max_num_batched_tokens),
                            ("--block-size", self.block_size), ("--num-prompts", self.num_prompts),
                            ("--max-concurrency", self.max_concurrency)):
            if value is not None and value < 1:
                raise OptionsError(f"{flag} must be a positive integer, got {value}")
        for flag, value in (("--input-tokens", self.input_tokens), ("--output-tokens", self.output_tokens)):
            if value < 1:
                raise OptionsError(f"{flag} must be a positive integer, got {value}")
        if self.gpu_memory_utilization is not None and not 0 < self.gpu_memory_utilization <= 1:
            raise OptionsError(f"--gpu-memory-utilization is a share of a core's memory in (0, 1], got "
                               f"{self.gpu_memory_utilization}")
        if not self.request_rate > 0:
            raise OptionsError(f"--request-rate must be > 0 requests/s (inf: all at once), got {self.request_rate}")
        if not self.burstiness > 0:
            raise OptionsError(f"--burstiness must be > 0, got {self.burstiness}")
        self._check_layout()


def _workload(args):
    from ._workload import arrival_times, from_dataset, uniform

    specs = from_dataset(args.dataset, args.num_prompts) if args.dataset else \
        uniform(args.num_prompts or 200, args.input_tokens, args.output_tokens)
    return specs, arrival_times(len(specs), args.request_rate, args.burstiness, args.seed)


def _rows(report: dict) -> list[tuple[str, str]]:
    b, e = report["bench_serve"], report["engine"]
    rows = [("requests completed", f"{b['completed']} in {fmt(b['duration'], ' s')}"),
            ("request throughput (req/s)", fmt(b["request_throughput"]) + range_text(b, "request_throughput")),
            ("output token throughput (tok/s)", fmt(b["output_throughput"]) + range_text(b, "output_throughput")),
            ("total token throughput (tok/s)", fmt(b["total_token_throughput"]) + range_text(b, "total_token_throughput"))]
    for name, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2E latency")):
        rows.append((f"{label} ms: mean / p50 / p90 / p99",
                     " / ".join(fmt(b[f"{k}_{name}_ms"]) for k in ("mean", "median", "p90", "p99"))
                     + range_text(b, f"mean_{name}_ms").replace("80% range", "80% range of the mean")))
    rows += [("engine steps", f"{e['steps']:,} (device {fmt(e['device_s'], ' s')}, host {fmt(e['host_s'], ' s')})"),
             ("preemptions", str(e["preemptions"])),
             ("KV cache", f"{e['kv_cache_blocks']:,} blocks of {e['block_size']} tokens ({e['kv_cache_tokens']:,} "
                          f"tokens); used: peak {e['kv_cache_usage_peak']:.1%}, mean {e['kv_cache_usage_mean']:.1%}"),
             ("vLLM settings", f"max-model-len {e['max_model_len']}, max-num-seqs {e['max_num_seqs']}, "
                               f"max-num-batched-tokens {e['max_num_batched_tokens']}, chunked prefill "
                               f"{'on' if e['enable_chunked_prefill'] else 'off'}, prefix caching "
                               f"{'on' if e['enable_prefix_caching'] else 'off'}, memory share "
                               f"{e['gpu_memory_utilization']}")]
    for g in report["graphs"]:
        what = f"prefill graph ({g['bucket']}-token bucket)" if g["kind"] == "cte" else \
            f"decode graph (batch {g['bucket']})"
        rows.append((what, f"{fmt(g['seconds'], ' ms', 1e3)} x {g['calls']:,} steps"))
    buckets = report["buckets"]
    rows.append(("graphs a deployment compiles", f"{len(buckets['prefill_tokens']) + len(buckets['decode_sequences'])}: "
                                                 f"prefill {buckets['prefill_tokens']}, decode {buckets['decode_sequences']}"))
    c = report.get("compile_deployment")
    if c:
        hours = lambda s: fmt(s / 3600, " h")
        total = (f"{hours(c['total_s'])} (range {hours(c['total_low_s'])} to {hours(c['total_high_s'])}) for "
                 f"{c['count'] - c['unknown']} of the {c['count']} graphs" if c["total_s"] is not None else "unknown")
        if c["unknown"]:
            total += f"; {c['unknown']} unknown (outside the public compile times' graph sizes)"
        rows.append(("neuronx-cc compile time (public-fit estimate)", f"{total}; fit: {c['fit']}"))
    rows += [(f"assumption `{name}`", text) for name, text in report["assumptions_serving"].items()]
    return rows


def _title(report: dict) -> str:
    w = report["workload"]
    how = (f"request rate {w['request_rate']}/s" if w["request_rate"] != "inf" else "all at once") + \
        (f", at most {w['max_concurrency']} in flight" if w["max_concurrency"] else "")
    return (f"serve (vLLM {report['vllm_version']} scheduler on a simulated clock; {plural(w['num_prompts'], 'request')}, "
            f"{how})")


def _run(args) -> int:
    with command.started("serve", quiet=args.quiet, verbose=args.verbose) as collected:
        if importlib.util.find_spec("vllm") is None:
            command.fail(PROG, NO_VLLM)
        from ..models._load_config import ConfigError, load_config
        from ..models._layout import LayoutError
        from . import _plan as plan, _setup as setup
        from ._workload import WorkloadError

        layout = args.layout
        command.ensure_runtime(PROG, args.argv(), instance=layout.instance, lnc=layout.lnc, dry_run=args.dry_run,
                               json_out=args.json)
        try:
            config = load_config(args.config)
            specs, due = _workload(args)
            if not args.verbose:   # vLLM logs its whole config at INFO; the report says what matters
                os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
            import vllm

            settings = plan.EngineSettings(args.max_model_len, args.max_num_seqs, args.max_num_batched_tokens,
                                           args.block_size, args.gpu_memory_utilization)
            report = plan.plan_serve(config, layout, setup.config_folder(args.config), dtype=args.dtype,
                                     settings=settings, specs=specs, due=due, max_concurrency=args.max_concurrency,
                                     seed=args.seed, routing=args.routing)
        except (ConfigError, LayoutError, WorkloadError, ValueError, MemoryError) as err:
            command.fail(PROG, str(err))
        report["mode"] = "serve"
        report["vllm_version"] = vllm.__version__
        report["workload"] = {"num_prompts": len(specs), "request_rate": "inf" if math.isinf(args.request_rate)
                              else args.request_rate, "burstiness": args.burstiness,
                              "max_concurrency": args.max_concurrency, "seed": args.seed, "dataset": args.dataset,
                              "input_tokens": None if args.dataset else args.input_tokens,
                              "output_tokens": None if args.dataset else args.output_tokens}
    from ..models._report import markdown, write_json

    # the plan's own probes are not the deployment's graphs (those are listed by bucket); the calibrated
    # ranges are the plan's own (serve/_ranges.py)
    report["compile_budget"] = None
    report["notes"] = collected.section(report.get("unmodelled_ops") or {}, report.get("ops_by_name"))
    return command.finish(report, markdown(report, _title(report), _rows(report)), json_out=args.json,
                          html=args.html, status=0 if report["fits"] else 1, write_json=write_json)


def run(args) -> int:
    """`plan serve`; `args` are its checked options (ServeOptions)."""
    try:
        status = _run(args)
    except SystemExit as stop:   # a clear error, already printed
        status = stop.code if isinstance(stop.code, int) else 1
    if "vllm" not in sys.modules:
        return status
    # The report or the error is written. vLLM imported triton, whose nanobind bindings print pages of
    # "leaked instance" reports when the interpreter finalises; a planning process has nothing left to clean up.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
