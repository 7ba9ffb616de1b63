"""Each Hugging Face `generate()` of a dry run, timed per phase: TTFT, time per output token, tokens/s.

A script's report (`plan run`) otherwise gives one total for the whole run: model loading, prefill
and every decode step together. While a dry run is active, `GenerationMixin.generate` is wrapped
(at once if transformers is imported, else when it is: the script imports it after the dry run
began), and so is the model's `prepare_inputs_for_generation` for the length of the call: generate
calls it eagerly right before every forward, prefill chunks and decode steps alike, with the
tokens that forward feeds, so each call marks where a forward starts in the estimate's events. A
hook on the module would not do: transformers compiles the module's `__call__` for decoding, and
Dynamo would trace the hook, baking the event count it reads into the graph.

The phases are those of `plan generate` (plan/models/_generate.py): TTFT is everything from the
call to the first forward that feeds one token per sequence (the prefill, in chunks when
`prefill_chunk_size` is set, and picking the first token); TPOT is the rest divided by the new
tokens after the first. Both include the host syncs in between (assumption `host_sync_s`), as the
report's total does; only events on the input's core count.
"""
from __future__ import annotations

import functools
import sys

from . import _progress as progress
from ._after_import import AfterImport

_MODULE = "transformers.generation.utils"


class GenerateCalls:
    """The `generate()` calls seen between `start()` and `stop()`, timed from `estimate`'s events (a dry
    run's `report()["generate_calls"]`; `plan generate` reads its one call from here too). `syncs`,
    when given (a dry run's HostSyncs), adds the host syncs between marks."""

    def __init__(self, estimate, syncs=None, *, timing=None) -> None:
        self.estimate, self.syncs = estimate, syncs
        self.timing = timing   # () -> (estimate, syncs) to time a call on, when it varies (a dry run's regions)
        self.calls: list[dict] = []
        self._patched = None      # (GenerationMixin, its own generate) while wrapped
        self._finder = None

    # ---- installing ----------------------------------------------------------------------------
    def start(self) -> None:
        if _MODULE in sys.modules:
            self._wrap(sys.modules[_MODULE])
        else:
            self._finder = AfterImport(_MODULE, self._wrap)
            sys.meta_path.insert(0, self._finder)

    def stop(self) -> None:
        if self._finder is not None and self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        self._finder = None
        if self._patched is not None:
            mixin, original = self._patched
            mixin.generate = original
            self._patched = None

    def _wrap(self, utils) -> None:
        mixin = utils.GenerationMixin
        original = mixin.generate
        calls = self

        @functools.wraps(original)
        def generate(model, *args, **kwargs):
            return calls._timed(original, model, args, kwargs)

        mixin.generate = generate
        self._patched = (mixin, original)

    # ---- one call -----------------------------------------------------------------------------
    def _mark(self, est, syncs) -> tuple[int, int]:
        return len(est.events), syncs.total if syncs is not None else 0

    @staticmethod
    def _seconds(est, a: tuple[int, int], b: tuple[int, int], device: int | None) -> float:
        events = est.events[a[0]:b[0]]
        busy = sum(e.seconds for e in events if device is None or e.device == device)
        return busy + (b[1] - a[1]) * est.hardware.assumptions.host_sync_s

    def _timed(self, original, model, args, kwargs):
        import torch

        from .._user_site import user_site

        site = user_site(3)
        est, syncs = self.timing() if self.timing is not None else (self.estimate, self.syncs)
        forwards: list[tuple[tuple[int, int], int]] = []   # (mark, tokens per sequence) per forward
        prepare = model.prepare_inputs_for_generation   # bound: the model class's own

        @functools.wraps(prepare)   # generate validates its kwargs against this signature
        def noting(input_ids, *a, **kw):
            tokens = kw.get("next_sequence_length") or (input_ids.shape[-1] if input_ids is not None else 1)
            forwards.append((self._mark(est, syncs), int(tokens)))
            progress.forward(int(tokens), (id(input_ids), getattr(input_ids, "shape", None)))   # "token i of N"
            return prepare(input_ids, *a, **kw)

        ids = kwargs.get("input_ids", args[0] if args else None)
        own = model.__dict__.get("prepare_inputs_for_generation")   # an instance's own, kept
        start = self._mark(est, syncs)
        model.prepare_inputs_for_generation = noting
        try:
            out = original(model, *args, **kwargs)
        finally:
            if own is None:
                del model.prepare_inputs_for_generation   # the class's method again
            else:
                model.prepare_inputs_for_generation = own
        end = self._mark(est, syncs)
        device = ids.device.index if isinstance(ids, torch.Tensor) and ids.device.type == "neuron" else None
        sequences = getattr(out, "sequences", out)
        batch = ids.shape[0] if isinstance(ids, torch.Tensor) else None
        input_tokens = ids.shape[-1] if isinstance(ids, torch.Tensor) else None
        new = (sequences.shape[-1] - input_tokens) if isinstance(sequences, torch.Tensor) and input_tokens else None
        total = self._seconds(est, start, end, device)
        decode = [mark for mark, tokens in forwards if tokens == 1]
        ttft = self._seconds(est, start, decode[0], device) if decode else total
        tpot = (total - ttft) / (new - 1) if new and new > 1 else None
        self.calls.append({
            "site": site, "batch": batch, "input_tokens": input_tokens, "new_tokens": new,
            "forward_calls": len(forwards), "prefill_forwards": len(forwards) - len(decode),
            "seconds": total, "ttft_ms": ttft * 1e3, "tpot_ms": tpot * 1e3 if tpot is not None else None,
            "output_tokens_per_s": batch * new / total if batch and new and total else None,
        })
        return out


