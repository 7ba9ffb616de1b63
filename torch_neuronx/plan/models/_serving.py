"""Serving figures from two estimated step times: TTFT, TPOT and throughput of a deployed model.

A Trainium deployment (NxD Inference, vLLM-Neuron) runs two kinds of compiled graph: a context-
encoding graph (CTE, "prefill") per prompt-length bucket, and a token-generation graph (TKG,
"decode") per batch size, each step ending with the sampled token (sampling is in the graph). So
a request's latency is made of whole graph steps, and this module composes them; the step times
themselves come from the estimated graphs (_deployed.py), never from constants here.

Symbols: t_c = one CTE step (one prefill chunk of `bucket` tokens), t_t = one TKG step of the
decode batch (the compiled batch, padded: DECODE_BATCH), each with the host's share of a step
(HOST), n_c = ceil(input tokens / chunk) prefill steps per request, O = output tokens.

Static batching (`--batch B`): the B prompts are encoded together, their chunks back to back,
then B sequences decode together:
    TTFT = n_c x t_c(B),  TPOT = t_t(B),  output tokens/s = B x O / (TTFT + (O - 1) x TPOT).

Continuous batching (`--concurrency N`), assumption SCHEDULE: N requests always in flight (a new
one arrives when one finishes, closed loop); prefill and decode run in separate steps, as
vLLM-Neuron schedules them; a waiting request's prefill chunk runs at the next step boundary, and
between two chunks of one prompt one decode step runs (chunked prefill lets decoding go on). Per
finished request the device spends n_c x t_c on its prefill and (O - 1) x t_t / N on its share of
the decode steps (each decode step gives every one of the N sequences a token), so:
    f      = n_c t_c / (n_c t_c + (O - 1) t_t / N)            share of device time in prefill
    TPOT   = t_t / (1 - f) = t_t + N n_c t_c / (O - 1)        decode steps slowed by others' prefills
    TTFT   = wait + n_c t_c + (n_c - 1) t_t,  wait = f t_c / 2 + (1 - f) t_t / 2
             (the rest of the step in progress when the request arrives: half a step on average)
    requests/s      = 1 / (n_c t_c + (O - 1) t_t / N)
    output tokens/s = O x requests/s
(Approximations: a request counts in the decode batch from its first token on, so the decode batch
is taken as N throughout; the TKG step is planned at batch N.)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

SCHEDULE = ("N requests always in flight (closed loop); prefill and decode in separate steps "
            "(vLLM-Neuron); a waiting prefill chunk runs at the next step boundary, one decode step "
            "between two chunks of a prompt; a new request waits on average half of the step in progress")


# the other assumptions of a deployed plan, named in its report (docs/plan.md gives their sources)
HOST = ("each step (CTE or TKG) waits for the host's share of it, the assumption serving_host_step_s "
        "(preparing inputs, launching the graph, reading back the token; vLLM-Neuron measures 437 us per graph "
        "execution run synchronously), added to the step's device time; 0 for a runner that prepares the "
        "next step while one runs")
SAMPLING = ("the sampler runs inside each step's graph on the device (on-device sampling, which vLLM's NxD "
            "Inference loader and optimum-neuron switch on): the step reads the last position's logits and "
            "returns one token id per sequence, planned as the greedy argmax over the vocabulary")
DECODE_BATCH = ("the TKG graph is compiled for --decode-batch sequences and every decode step runs all of them, "
                "the empty ones padded (NxD Inference's batch_size, vLLM's max_num_seqs): its time is the padded "
                "batch's, its tokens the live sequences'")
CHUNKS = "every prefill chunk runs the graph of the chunk's bucket (the last chunk padded to it)"
CTE_ATTENTION = ("the CTE attends within the prompt's bucket (NxD Inference's context-encoding model computes "
                 "attention over the prompt's own keys and values, then writes them to the KV cache); the TKG "
                 "attends over the whole static cache")


BUCKETS = ("without --buckets, the context-encoding buckets are NxD Inference's automatic ones: powers of two "
           "from 128 below 2^round(log2(max length)), then the max length itself (neuronx-distributed-inference "
           "modules/autobucketing.py, generate_buckets), so the static KV cache holds the max length, not the "
           "next power of two")


def assumptions(continuous_batching: bool, default_buckets: bool = False, padded_decode: bool = False) -> dict:
    """The named serving assumptions a deployed plan rests on."""
    named = {"host": HOST, "sampling": SAMPLING, "chunks": CHUNKS, "cte_attention": CTE_ATTENTION}
    if padded_decode:
        named["decode_batch"] = DECODE_BATCH
    if default_buckets:
        named["buckets"] = BUCKETS
    if continuous_batching:
        named["schedule"] = SCHEDULE
    return named


@dataclass(frozen=True)
class Steps:
    """Estimated seconds of one CTE step (one chunk, its batch) and one TKG step (its batch)."""
    cte_s: float
    tkg_s: float


def with_host(steps: Steps, host_step_s: float) -> Steps:
    """Each step's device time plus the host's share of it (HOST, serving_host_step_s)."""
    return Steps(steps.cte_s + host_step_s, steps.tkg_s + host_step_s)


def prefill_steps(input_tokens: int, chunk: int) -> int:
    """n_c: CTE steps one prompt takes when prefilled `chunk` tokens at a time."""
    return math.ceil(input_tokens / chunk)


def static_batch(steps: Steps, batch: int, input_tokens: int, output_tokens: int, chunk: int) -> dict:
    """Figures of `batch` prompts encoded and decoded together (see the module docstring)."""
    n_c = prefill_steps(input_tokens, chunk)
    ttft = n_c * steps.cte_s
    tpot = steps.tkg_s
    total = ttft + (output_tokens - 1) * tpot
    return {"ttft_s": ttft, "tpot_s": tpot, "request_s": total, "prefill_steps": n_c,
            "output_tokens_per_s": batch * output_tokens / total if total else None,
            "requests_per_s": batch / total if total else None, "prefill_share": ttft / total if total else None}


def continuous(steps: Steps, concurrency: int, input_tokens: int, output_tokens: int, chunk: int) -> dict:
    """Figures of `concurrency` requests in flight under the SCHEDULE assumption (module docstring)."""
    n = concurrency
    n_c = prefill_steps(input_tokens, chunk)
    prefill = n_c * steps.cte_s
    decode_share = (output_tokens - 1) * steps.tkg_s / n
    per_request = prefill + decode_share            # device time per finished request
    f = prefill / per_request if per_request else 0.0
    tpot = steps.tkg_s + (n * prefill / (output_tokens - 1) if output_tokens > 1 else 0.0)
    wait = f * steps.cte_s / 2 + (1 - f) * steps.tkg_s / 2
    ttft = wait + prefill + (n_c - 1) * steps.tkg_s
    return {"ttft_s": ttft, "tpot_s": tpot, "queue_wait_s": wait, "prefill_steps": n_c,
            "request_s": ttft + (output_tokens - 1) * tpot, "prefill_share": f,
            "output_tokens_per_s": output_tokens / per_request if per_request else None,
            "requests_per_s": 1 / per_request if per_request else None}
