"""Which ranks a dry run starts, and which started rank stands in for each rank that was not.

Default: rank 0 and the last rank (world_size - 1). The assumption: ranks other than 0 behave
alike. That holds for SPMD training and inference as torchrun runs them (TP, FSDP, DDP, HSDP, EP
with balanced routing placeholders): every rank holds a shard of the same size (FSDP2 pads the
last shard to the others' size; TP needs sizes that divide), issues the same collectives and runs
the same ops. Rank 0 is run because it alone often logs, evaluates, saves checkpoints or writes
summaries; the last rank because uneven work lands there when it exists (the last shard of an
uneven split, the last pipeline stage with the loss and lm_head, the last node of a multi-node
job). Where ranks differ otherwise, name them (`--ranks 0,3,17`) or run them all (`--all-ranks`).

With a pipeline layout (`--pp P`, or PP_SIZE in the environment) ranks differ by stage: each stage
holds other layers (the first the embeddings, the last lm_head and the loss) and other activations
(the first stage keeps the most micro-batches in flight). Ranks are ordered as torchrun, torchtitan
and Megatron order them, pipeline outermost: stage s holds ranks s*W/P .. (s+1)*W/P - 1, and within
a stage TP and DP ranks run the same program on same-sized shards (TP rank 0 and the others alike).
So one rank runs per stage: rank 0 for the first (it also logs), the first rank of each middle
stage, the last rank for the last; with P = 1 that is the default above.

A rank that was not run takes the report of the started rank of its stage nearest to it other than
rank 0 (ties to the lower one); rank 0 stands in only when it is the only one run in its stage (or,
when its stage ran no rank, e.g. with --ranks, the started rank nearest to it).
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


def check_pp(pp: int, world_size: int) -> int:
    """The pipeline degree, checked against the world size."""
    if pp < 1 or world_size % pp:
        divisors = [d for d in range(1, world_size + 1) if world_size % d == 0]
        raise ValueError(f"--pp {pp} (pipeline stages) must divide the world size {world_size}: "
                         f"choose one of {divisors}")
    return pp


def stage_of(rank: int, world_size: int, pp: int = 1) -> int:
    """The pipeline stage of a rank (pipeline outermost in the rank order)."""
    return rank // (world_size // pp)


def choose_ranks(world_size: int, *, all_ranks: bool = False, ranks: str | None = None, pp: int = 1) -> list[int]:
    """The ranks to start (see the module docstring for the default): one per role."""
    check_pp(pp, world_size)
    if all_ranks:
        return list(range(world_size))
    if ranks:
        return parse_ranks(ranks, world_size)
    per_stage = world_size // pp
    middle = {s * per_stage for s in range(1, pp - 1)}
    return sorted({0, world_size - 1} | middle)


def representative(rank: int, run: list[int], *, world_size: int | None = None, pp: int = 1) -> int:
    """The started rank whose report stands in for `rank` (one of its stage's when one ran)."""
    if rank in run:
        return rank
    if pp > 1 and world_size:
        same_stage = [r for r in run if stage_of(r, world_size, pp) == stage_of(rank, world_size, pp)]
        run = same_stage or run
    others = [r for r in run if r != 0] or run
    return min(others, key=lambda r: (abs(r - rank), r))
