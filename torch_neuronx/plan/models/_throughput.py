"""Step time, tokens/s, FLOPs and MFU of a training plan, from one computation.

Every figure comes from the same two measured numbers, the FLOPs one core runs in a step and the
step time, so they agree by construction: tokens/s = tokens per step / step time, MFU = FLOPs per
core / (step time x bf16 peak of one logical core), and FLOPs per token = FLOPs of all cores /
tokens per step (so MFU = tokens/s x FLOPs per token / (cores x peak)).
"""
from __future__ import annotations


def throughput(*, flops_per_core: float, step_s: float, tokens_per_step: int, sequences_per_step: int,
               cores: int, peak_flops_per_core: float) -> dict:
    """The report's throughput figures. `flops_per_core`: the FLOPs of the busiest core in one
    optimizer step (every core of these layouts runs the same program on its own shard)."""
    if step_s <= 0:
        return {"step_time_s": step_s, "tokens_per_s": None, "sequences_per_s": None, "mfu": None,
                "flops_per_core": flops_per_core, "flops_per_token": None}
    return {
        "step_time_s": step_s,
        "tokens_per_s": tokens_per_step / step_s,
        "sequences_per_s": sequences_per_step / step_s,
        "flops_per_core": flops_per_core,
        "flops_per_token": flops_per_core * cores / tokens_per_step,
        "mfu": flops_per_core / (step_s * peak_flops_per_core),
    }
