"""What one engine step costs on the target: its compiled graphs, looked up by bucket.

A vLLM Neuron deployment compiles one prefill graph per token-count bucket and one decode graph per
batch-size bucket, and pads each step's input to the smallest bucket that holds it (vLLM Neuron's
`num_batched_tokens_buckets`, default powers of two from 128 up to max_num_batched_tokens, and
`num_seqs_buckets`, default powers of two from 1 up to max_num_seqs, the largest bucket equal to the
limit: awsdocs-neuron.readthedocs-hosted.com .../vllm-neuron/docs/guides/reference-configuration.html).
Each decode graph reads the KV cache of max_model_len tokens per sequence, whatever the sequence's
length (.../vllm-neuron/docs/design/vllm/decode-context-length-bucketing.html).

The price of one bucket is what `plan generate`'s deployed mode measures for that graph
(plan/models/_deployed.py: the model built from its config on phantom memory, the step compiled
with the neuron backend at that shape, 1- and 2-layer probes extrapolated to the config's depth);
nothing here is a cost formula. A bucket is priced the first time a step needs it, so a plan
compiles only the buckets its workload reaches.
"""
from __future__ import annotations

import gc
from typing import Callable

MIN_PREFILL_BUCKET = 128   # vLLM Neuron's smallest default prefill bucket


def _powers_of_two(low: int, limit: int) -> list[int]:
    out, b = [], low
    while b < limit:
        out.append(b)
        b *= 2
    return out + [limit]


def prefill_buckets(max_num_batched_tokens: int) -> list[int]:
    return _powers_of_two(MIN_PREFILL_BUCKET, max_num_batched_tokens) if max_num_batched_tokens > MIN_PREFILL_BUCKET \
        else [max_num_batched_tokens]


def decode_buckets(max_num_seqs: int) -> list[int]:
    return _powers_of_two(1, max_num_seqs)


class StepPrices:
    """Seconds of one prefill graph (`cte(tokens)`) and one decode graph (`tkg(sequences)`) at the
    smallest bucket that holds the step's input; `price(kind, bucket)` gives a graph's figures
    (a dict with "seconds") and is asked once per bucket."""

    def __init__(self, prefill: list[int], decode: list[int], price: Callable[[str, int], dict]):
        self.buckets = {"cte": sorted(prefill), "tkg": sorted(decode)}
        self._price = price
        self.priced: dict[tuple[str, int], dict] = {}

    def graph(self, kind: str, size: int) -> tuple[int, dict]:
        fits = [b for b in self.buckets[kind] if b >= size]
        if not fits:   # vLLM's scheduler keeps a step within max_num_batched_tokens and max_num_seqs
            raise ValueError(f"a step of {size} {'tokens' if kind == 'cte' else 'sequences'} is larger than the "
                             f"largest {kind} bucket {self.buckets[kind][-1]}")
        bucket = fits[0]
        if (kind, bucket) not in self.priced:
            self.priced[(kind, bucket)] = self._price(kind, bucket)
        return bucket, self.priced[(kind, bucket)]

    def cte(self, tokens: int) -> tuple[int, float]:
        bucket, figures = self.graph("cte", tokens)
        return bucket, figures["seconds"]

    def tkg(self, sequences: int) -> tuple[int, float]:
        bucket, figures = self.graph("tkg", sequences)
        return bucket, figures["seconds"]


class ScaledPrices:
    """`prices` with every prefill graph's seconds times `factors["cte"]` and every decode graph's times
    `factors["tkg"]`: the same buckets, priced once (plan serve's calibrated range, serve/_ranges.py)."""

    def __init__(self, prices: StepPrices, factors: dict[str, float]):
        self.base, self.factors = prices, factors
        self.buckets, self.priced = prices.buckets, prices.priced

    def cte(self, tokens: int) -> tuple[int, float]:
        bucket, seconds = self.base.cte(tokens)
        return bucket, seconds * self.factors["cte"]

    def tkg(self, sequences: int) -> tuple[int, float]:
        bucket, seconds = self.base.tkg(sequences)
        return bucket, seconds * self.factors["tkg"]


class ModelProbe:
    """Prices the graphs of `config` on `layout` as `plan generate --mode deployed` measures them
    (its probes, the same depth extrapolation); also what the weights hold per core."""

    def __init__(self, config, layout, dtype, max_model_len: int, routing=None):
        from ..models import _deployed as deployed
        from ..models._build import padded_for_tp
        from ..models._layout import check_model
        from ..models._routing import parse

        self.original = config
        self.config = padded_for_tp(config, layout.tp)   # heads padded to a multiple of TP, as NxD Inference compiles
        check_model(layout, self.config)
        self.layout, self.dtype, self.max_len = layout, dtype, max_model_len
        self.routing = parse(routing) if isinstance(routing, (str, type(None))) else routing
        self.depth = deployed._text(self.config).num_hidden_layers
        uniform = deployed._uniform_layers(self.config)
        self.probes = [self.depth] if self.depth <= 2 or not uniform else [1, 2]

    def held(self) -> dict:
        """The full-depth model allocated: its base report (fits, capacity) and bytes held per core."""
        from ..models import _deployed as deployed

        gc.collect()
        return deployed._held_at_depth(self.config, self.layout, self.dtype, set(), self.max_len)

    def __call__(self, kind: str, bucket: int) -> dict:
        from ..models import _deployed as deployed

        results = []
        for depth in self.probes:
            gc.collect()   # the previous probe's model is cyclic garbage until collected
            at_depth = deployed._with_depth(self.config, depth)
            if kind == "cte":   # one prompt segment of `bucket` tokens (batch 1)
                r = deployed._probe(at_depth, self.layout, self.dtype, 1, bucket, 1, max(self.max_len, bucket), 0,
                                    graphs=("cte",), routing=self.routing)
            else:               # one token for each of `bucket` sequences, over caches of max_model_len
                r = deployed._probe(at_depth, self.layout, self.dtype, 1, 1, bucket, self.max_len, self.max_len - 1,
                                    graphs=("tkg",), routing=self.routing)
            if r["base"]["oom"]:
                raise MemoryError(f"the {kind} graph at bucket {bucket} does not fit a core: {r['base']['oom']}")
            results.append(r)
        fig = results[0] if len(results) == 1 else deployed._extrapolate(results[0], results[1], *self.probes,
                                                                          self.depth)
        return {**fig[kind], "step_transient_bytes": results[-1]["step_transient"]}
