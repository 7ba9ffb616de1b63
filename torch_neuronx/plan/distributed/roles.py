"""Which ranks a dry run starts, and which started rank stands in for each rank that was not.

Default: rank 0 and the last rank (world_size - 1). The assumption: ranks other than 0 behave
alike. That holds for SPMD training and inference as torchrun runs them (TP, FSDP, DDP, HSDP, EP
with balanced routing placeholders): every rank holds a shard of the same size (FSDP2 pads the
last shard to the others' size; TP needs sizes that divide), issues the same collectives and runs
the same ops. Rank 0 is run because it alone often logs, evaluates, saves checkpoints or writes
summaries; the last rank because uneven work lands there when it exists (the last shard of an
uneven split, the last pipeline stage with the loss and lm_head, the last node of a multi-node
job). Where ranks differ otherwise, name them (`--ranks 0,3,17`) or run them all (`--all-ranks`).

A rank that was not run takes the report of the started rank nearest to it other than rank 0
(ties to the lower one); rank 0 stands in only when it is the only one run.
"""
from __future__ import annotations


def parse_ranks(text: str, world_size: int) -> list[int]:
    """"0,5,7" or "0-3,31" -> sorted distinct ranks, each checked against the world size."""
    ranks: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi or lo)
        except ValueError:
            raise ValueError(f"--ranks {text!r}: {part!r} is not a rank or a range such as 0-3") from None
        if not 0 <= first <= last < world_size:
            raise ValueError(f"--ranks {text!r}: {part!r} is outside the world of {world_size} ranks "
                             f"(0..{world_size - 1})")
        ranks.update(range(first, last + 1))
    if not ranks:
        raise ValueError(f"--ranks {text!r} names no rank; give e.g. --ranks 0,{world_size - 1}")
    return sorted(ranks)


def choose_ranks(world_size: int, *, all_ranks: bool = False, ranks: str | None = None) -> list[int]:
    """The ranks to start (see the module docstring for the default)."""
    if all_ranks:
        return list(range(world_size))
    if ranks:
        return parse_ranks(ranks, world_size)
    return sorted({0, world_size - 1})


def representative(rank: int, run: list[int]) -> int:
    """The started rank whose report stands in for `rank`."""
    if rank in run:
        return rank
    others = [r for r in run if r != 0] or run
    return min(others, key=lambda r: (abs(r - rank), r))
