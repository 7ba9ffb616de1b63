"""The requests of a planned deployment and when they reach the server, as `vllm bench serve` sends them.

Lengths: every request `--input-tokens` in and `--output-tokens` out (bench serve's `random` dataset at
range ratio 0), or one request per line of a `--dataset` file. Arrivals: bench serve's `get_request`
(vllm/benchmarks/serve.py): with a finite `--request-rate` the gaps are gamma-distributed with shape
`burstiness` (1: Poisson) and mean 1 / rate, drawn from numpy's generator seeded with `--seed` as
bench serve seeds it, then scaled so the last request leaves at num_prompts / rate; with an infinite
rate every request leaves at once. `--max-concurrency` is bench serve's client semaphore: a request
that is due waits for one of the C slots, and its clock starts when it is sent (its TTFT and latency
exclude that wait, as bench serve measures them).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class RequestSpec:
    input_tokens: int
    output_tokens: int


class WorkloadError(ValueError):
    """A request or arrival setting that cannot be planned; the message names the flag."""


def uniform(num_prompts: int, input_tokens: int, output_tokens: int) -> list[RequestSpec]:
    for flag, value in (("--num-prompts", num_prompts), ("--input-tokens", input_tokens),
                        ("--output-tokens", output_tokens)):
        if not isinstance(value, int) or value < 1:
            raise WorkloadError(f"{flag} must be a positive integer, got {value!r}")
    return [RequestSpec(input_tokens, output_tokens)] * num_prompts


def from_dataset(path: str, num_prompts: int | None = None) -> list[RequestSpec]:
    """One request per line of a JSON-lines file: {"input_tokens": N, "output_tokens": M} (the first
    `num_prompts` lines when given)."""
    try:
        with open(path) as f:
            lines = f.readlines()
    except OSError as err:
        raise WorkloadError(f"--dataset {path!r} cannot be read ({err.strerror})") from None
    specs = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            spec = RequestSpec(int(row["input_tokens"]), int(row["output_tokens"]))
        except (ValueError, KeyError, TypeError):
            raise WorkloadError(f"--dataset {path!r} line {number}: expected a JSON object with integer "
                                f"\"input_tokens\" and \"output_tokens\", got {line.strip()[:80]!r}") from None
        if spec.input_tokens < 1 or spec.output_tokens < 1:
            raise WorkloadError(f"--dataset {path!r} line {number}: input_tokens and output_tokens must be >= 1")
        specs.append(spec)
    if not specs:
        raise WorkloadError(f"--dataset {path!r} holds no requests")
    return specs[:num_prompts] if num_prompts else specs


def arrival_times(count: int, request_rate: float, burstiness: float = 1.0, seed: int = 0) -> list[float]:
    """Seconds after the start at which each of `count` requests is due (bench serve's get_request)."""
    import numpy as np

    if not request_rate > 0:
        raise WorkloadError(f"--request-rate must be > 0 requests/s (or inf), got {request_rate!r}")
    if not burstiness > 0:
        raise WorkloadError(f"--burstiness must be > 0, got {burstiness!r}")
    if math.isinf(request_rate):
        return [0.0] * count
    rng = np.random.RandomState(seed)   # bench serve seeds numpy's global generator the same way
    theta = 1.0 / (request_rate * burstiness)
    gaps = [1.0 / request_rate if math.isinf(burstiness) else rng.gamma(shape=burstiness, scale=theta)
            for _ in range(count)]
    times = list(np.cumsum(gaps))
    scale = (count / request_rate) / times[-1] if times[-1] else 1.0
    return [float(t * scale) for t in times]
