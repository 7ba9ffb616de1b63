"""vLLM's own engine core and scheduler on a simulated clock.

`EngineCore` (vllm/v1/engine/core.py) is built as `vllm serve` builds it, from `EngineArgs`, with one
difference: its executor is `SimulatedExecutor`, which runs no model. Everything above the executor
is vLLM's: the scheduler (`vllm.v1.core.sched.scheduler.Scheduler`: admission, max-num-seqs, the token
budget, chunked prefill, preemption), its paged KV-cache manager sized by vLLM's
`get_kv_cache_configs` from the memory the executor reports, the request objects and
`update_from_output`. The executor answers each scheduled step as a model runner would (a token for
every request whose known tokens are all computed, none for a prompt chunk that is not the last) and
charges the step's time to the clock: the price of its compiled graphs on the target (`StepPrices`,
_prices.py) plus the engine's own host time per step.
"""
from __future__ import annotations

import heapq
from concurrent.futures import Future
from dataclasses import dataclass, field

from ._workload import RequestSpec


@dataclass
class Clock:
    """The simulated time, what the device did and the KV cache the scheduler used."""
    now: float = 0.0
    steps: int = 0
    device_s: float = 0.0
    host_s: float = 0.0
    preemptions: int = 0
    kv_usage: list[float] = field(default_factory=list)
    graph_calls: dict = field(default_factory=dict)   # (kind, bucket) -> calls


class _Runner:
    """What a model runner knows of each request, enough to answer a step (no tensors)."""

    def __init__(self, prices, clock: Clock):
        self.prices, self.clock = prices, clock
        self.prompt: dict[str, int] = {}
        self.known: dict[str, int] = {}   # prompt + sampled tokens: what must be in the KV cache

    def execute(self, out):
        from vllm.v1.outputs import ModelRunnerOutput

        for req_id in out.finished_req_ids:
            self.prompt.pop(req_id, None)
            self.known.pop(req_id, None)
        computed = {}
        for new in out.scheduled_new_reqs:
            self.prompt.setdefault(new.req_id, len(new.prompt_token_ids))
            self.known.setdefault(new.req_id, len(new.prompt_token_ids))
            computed[new.req_id] = new.num_computed_tokens
        cached = out.scheduled_cached_reqs
        computed.update(zip(cached.req_ids, cached.num_computed_tokens))
        self.clock.preemptions += len(out.preempted_req_ids or ())
        prefill_tokens, decode_seqs = 0, 0
        req_ids, sampled = [], []
        for req_id, n in out.num_scheduled_tokens.items():
            before = computed[req_id]
            if n == 1 and before == self.known[req_id] - 1 and before >= self.prompt[req_id]:
                decode_seqs += 1
            else:
                prefill_tokens += n
            req_ids.append(req_id)
            if before + n >= self.known[req_id]:   # every known token computed: the step samples one
                self.known[req_id] += 1
                sampled.append([0])   # any id: requests ignore EOS and stop at their max_tokens
            else:
                sampled.append([])
        seconds = 0.0
        for kind, size, price in (("cte", prefill_tokens, self.prices.cte), ("tkg", decode_seqs, self.prices.tkg)):
            if size:
                bucket, s = price(size)
                seconds += s
                self.clock.graph_calls[(kind, bucket)] = self.clock.graph_calls.get((kind, bucket), 0) + 1
        self.clock.device_s += seconds
        self.clock.now += seconds
        return ModelRunnerOutput(req_ids=req_ids, req_id_to_index={r: i for i, r in enumerate(req_ids)},
                                 sampled_token_ids=sampled)


@dataclass
class Target:
    """What the simulated executor answers with, set before vLLM's engine core is built:
    `prices` (_prices.StepPrices), `kv_specs` (a function of the VllmConfig giving {layer name:
    KVCacheSpec} of one TP rank), `available_bytes` (the memory one rank leaves to the KV cache, what
    vLLM's workers measure by profiling) and the `clock` the steps are charged to."""
    prices: object = None
    kv_specs: object = None
    available_bytes: int = 0
    clock: Clock = field(default_factory=Clock)


def simulated_executor(target: Target):
    """An `Executor` class (vLLM's interface) that runs every step on `target`."""
    from vllm.v1.executor.abstract import Executor
    from vllm.v1.worker.worker_base import CompilationTimes

    class SimulatedExecutor(Executor):
        def _init_executor(self) -> None:
            self.runner = _Runner(target.prices, target.clock)

        def collective_rpc(self, method, timeout=None, args=(), kwargs=None, non_block=False):
            answer = {
                "get_kv_cache_spec": lambda: target.kv_specs(self.vllm_config),
                "determine_available_memory": lambda: target.available_bytes,
                "get_supported_kv_cache_layouts": lambda: ["NHD"],
                "set_kv_cache_layout": lambda *a: None,
                "initialize_from_config": lambda *a: None,
                "compile_or_warm_up_model": lambda: CompilationTimes(0.0, 0.0),
                "update_max_model_len": lambda *a: None,
                "get_kv_connector_handshake_metadata": lambda: None,
                "execute_model": lambda out: self.runner.execute(out),
            }.get(method if isinstance(method, str) else "")
            if answer is None:
                raise NotImplementedError(f"the simulated executor does not run {method!r}")
            result = [answer(*args, **(kwargs or {}))]
            if non_block:
                future = Future()
                future.set_result(result)
                return future
            return result

        def execute_model(self, scheduler_output, non_block: bool = False):
            result = self.runner.execute(scheduler_output)
            if non_block:
                future = Future()
                future.set_result(result)
                return future
            return result

        def check_health(self) -> None:
            return None

    return SimulatedExecutor


@dataclass
class Served:
    """One request as the client saw it (times in simulated seconds from the start)."""
    spec: RequestSpec
    start: float
    token_times: list[float] = field(default_factory=list)
    end: float | None = None


def run(engine, clock: Clock, specs: list[RequestSpec], due: list[float], *, max_concurrency: int | None,
        host_s: float, vocab_size: int, seed: int = 0, max_steps: int | None = None) -> list[Served]:
    """Send `specs` (due at `due` seconds, bench serve's client) to `engine` (a vLLM EngineCore) and
    step it until every request finished; each step costs its graphs' time plus `host_s`."""
    import numpy as np
    from vllm import SamplingParams
    from vllm.v1.engine import EngineCoreRequest

    rng = np.random.RandomState(seed)   # random prompt tokens, as bench serve's random dataset: no shared prefix
    slots = [0.0] * max_concurrency if max_concurrency else None   # when each client slot is free
    served: dict[str, Served] = {}
    waiting, done = 0, 0
    budget = max_steps or 50 * sum(s.input_tokens + s.output_tokens for s in specs) + 1000

    def next_start() -> float | None:
        if waiting == len(specs):
            return None
        if slots is None:
            return due[waiting]
        return max(due[waiting], slots[0]) if slots else None

    while done < len(specs):
        while (start := next_start()) is not None and start <= clock.now:
            if slots is not None:
                heapq.heappop(slots)
            spec = specs[waiting]
            req_id = str(waiting)
            served[req_id] = Served(spec, start)
            params = SamplingParams(max_tokens=spec.output_tokens, ignore_eos=True, temperature=0.0,
                                    detokenize=False)
            prompt = rng.randint(0, vocab_size, spec.input_tokens).tolist()
            request = EngineCoreRequest(request_id=req_id, prompt_token_ids=prompt, mm_features=None,
                                        sampling_params=params, pooling_params=None, arrival_time=start,
                                        lora_request=None, cache_salt=None, data_parallel_rank=None)
            engine.add_request(*engine.preprocess_add_request(request))
            waiting += 1
        if not engine.scheduler.has_requests():
            start = next_start()
            if start is None:
                raise RuntimeError("the engine is idle with requests unfinished and none left to send")
            clock.now = max(clock.now, start)
            continue
        outputs, executed = engine.step()
        if not executed:
            if engine.scheduler.get_num_unfinished_requests() == 0:   # a step that only retired finished requests
                continue
            raise RuntimeError("vLLM's scheduler scheduled nothing with requests waiting: a request does not "
                               "fit the KV cache; lower --input-tokens / --output-tokens or raise --max-model-len "
                               "and the memory share")
        clock.now += host_s
        clock.host_s += host_s
        clock.steps += 1
        clock.kv_usage.append(engine.scheduler.kv_cache_manager.usage)
        if clock.steps > budget:
            raise RuntimeError(f"the engine ran {clock.steps} steps without finishing; stopping")
        for eco in outputs.values():
            for o in eco.outputs:
                record = served[o.request_id]
                record.token_times += [clock.now] * len(o.new_token_ids)
                if o.finish_reason is not None:
                    record.end = clock.now
                    done += 1
                    if slots is not None:
                        heapq.heappush(slots, clock.now)
    return [served[str(i)] for i in range(len(specs))]
