"""Interleaved repeats: the sides of a comparison timed in turns, the order flipped every repeat, so
drift on a shared machine (frequency, other processes) hits every side alike."""
from __future__ import annotations

import gc
import time
from typing import Callable, TypeVar

T = TypeVar("T")


def interleaved(sides: dict[str, Callable[[], T]], budget_s: float, min_repeats: int = 7) -> dict[str, list[T]]:
    """{side: [one result per repeat]}: each repeat calls every side once, in dict order on even
    repeats and reversed on odd ones, until ``budget_s`` has passed and at least ``min_repeats``
    repeats are done. The garbage collector is off meanwhile (a collection would land on one side)."""
    results: dict[str, list[T]] = {name: [] for name in sides}
    names = list(sides)
    gc.collect()
    gc.disable()
    try:
        deadline = time.perf_counter() + budget_s
        r = 0
        while r < min_repeats or time.perf_counter() < deadline:
            for name in (names if r % 2 == 0 else names[::-1]):
                results[name].append(sides[name]())
            r += 1
    finally:
        gc.enable()
    return results
