"""The figures of a planned run, computed by `vllm bench serve`'s own `calculate_metrics`
(vllm/benchmarks/serve.py) from what each simulated request saw, and named as bench serve names them
in its result JSON: request and token throughput, mean / median / std / pNN of TTFT, TPOT, ITL and
end-to-end latency in ms.
"""
from __future__ import annotations

import contextlib
import io

PERCENTILES = (50.0, 90.0, 99.0)
METRICS = ("ttft", "tpot", "itl", "e2el")


def _word(p: float) -> str:
    return str(int(p)) if int(p) == p else str(p)   # bench serve's p99 / p99.9 keys


def bench_serve_result(served, duration_s: float, percentiles=PERCENTILES) -> dict:
    """bench serve's result fields for `served` (_engine.Served), the run lasting `duration_s`."""
    from vllm.benchmarks.datasets import SampleRequest
    from vllm.benchmarks.lib.endpoint_request_func import RequestFuncOutput
    from vllm.benchmarks.serve import calculate_metrics

    inputs, outputs = [], []
    for r in served:
        times = r.token_times
        inputs.append(SampleRequest(prompt="", prompt_len=r.spec.input_tokens, expected_output_len=r.spec.output_tokens))
        outputs.append(RequestFuncOutput(
            success=r.end is not None, latency=(r.end or r.start) - r.start, output_tokens=len(times),
            ttft=times[0] - r.start if times else 0.0, itl=[b - a for a, b in zip(times, times[1:])],
            prompt_len=r.spec.input_tokens, start_time=r.start))
    with contextlib.redirect_stdout(io.StringIO()):   # it prints a plotting tip
        metrics, _ = calculate_metrics(input_requests=inputs, outputs=outputs, dur_s=duration_s, tokenizer=None,
                                       selected_percentiles=list(percentiles), goodput_config_dict={})
    result = {"duration": duration_s, "completed": metrics.completed, "failed": metrics.failed,
              "total_input_tokens": metrics.total_input, "total_output_tokens": metrics.total_output,
              "request_throughput": metrics.request_throughput, "output_throughput": metrics.output_throughput,
              "total_token_throughput": metrics.total_token_throughput,
              "max_output_tokens_per_s": metrics.max_output_tokens_per_s,
              "max_concurrent_requests": metrics.max_concurrent_requests}
    for name in METRICS:
        for stat in ("mean", "median", "std"):
            result[f"{stat}_{name}_ms"] = float(getattr(metrics, f"{stat}_{name}_ms"))
        for p, value in getattr(metrics, f"percentiles_{name}_ms"):
            result[f"p{_word(p)}_{name}_ms"] = float(value)
    return result
