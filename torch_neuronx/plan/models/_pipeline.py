"""Pipeline parallelism in a training plan: the stage a core runs and the schedule around it.

The plan runs one stage's program for real (dry run): the busiest stage, the last one, with its
share of the decoder layers, the final norm, the head and the loss (and the embedding lookup,
whose bytes make the stage's memory an upper bound). The schedule is closed form over the
stage's measured micro-step (forward + backward, t) and its point-to-point transfers:

    GPipe, 1F1B:               step = (m + p - 1) x t                 bubble = (p - 1) / m of m x t
    interleaved (v chunks):    step = (m + (p - 1) / v) x t           bubble = (p - 1) / (v m)

with m micro-batches per optimizer step, p stages (Narayanan et al., "Efficient Large-Scale
Language Model Training on GPU Clusters Using Megatron-LM", SC'21, sections 2.2.1-2.2.2; NxD
Training's 1F1B and interleaved schedules). Activations held by the first stage, the one that
holds the most: GPipe all m micro-batches, 1F1B min(m, p), interleaved min(m v, (v - 1) p + 2 (p - 1) + 1)
chunk-micro-batches of 1/v of a stage's activations each (Megatron's warm-up count).
"""
from __future__ import annotations

SCHEDULES = ("gpipe", "1f1b", "interleaved")


def check_schedule(pp: int, schedule: str, chunks: int | None) -> int:
    """The number of model chunks per stage for `schedule`; ValueError naming the fix."""
    if schedule not in SCHEDULES:
        raise ValueError(f"--pp-schedule {schedule!r} is not a pipeline schedule; use one of: {', '.join(SCHEDULES)}")
    if chunks is None:
        chunks = 2 if schedule == "interleaved" and pp > 1 else 1
    if not isinstance(chunks, int) or chunks < 1:
        raise ValueError(f"--pp-chunks must be a positive integer, got {chunks!r}")
    if schedule != "interleaved" and chunks != 1:
        raise ValueError(f"--pp-chunks {chunks} needs --pp-schedule interleaved ({schedule} runs one chunk per stage)")
    if schedule == "interleaved" and pp > 1 and chunks < 2:
        raise ValueError("--pp-schedule interleaved needs --pp-chunks >= 2 (virtual stages per rank); "
                         "with one chunk it is 1F1B: use --pp-schedule 1f1b")
    return chunks


def stage_layers(layers: int, pp: int) -> int:
    """Decoder layers of the last stage (transformers and NxD give it the remainder of an uneven split)."""
    return layers - (pp - 1) * (layers // pp)


def bubble_fraction(pp: int, microbatches: int, chunks: int = 1) -> float:
    """Idle time over useful time of a stage: (p - 1) / (v m)."""
    return (pp - 1) / (chunks * microbatches)


def step_seconds(micro_s: float, pp: int, microbatches: int, chunks: int = 1) -> float:
    """Time of the m micro-batches of one optimizer step through p stages (optimizer step excluded)."""
    return micro_s * microbatches * (1 + bubble_fraction(pp, microbatches, chunks))


def in_flight(pp: int, microbatches: int, schedule: str, chunks: int = 1) -> float:
    """Micro-batches whose activations the first stage holds at once, in units of one stage's
    activations of one micro-batch."""
    if schedule == "gpipe":
        return float(microbatches)
    if schedule == "1f1b":
        return float(min(microbatches, pp))
    warmup = (chunks - 1) * pp + 2 * (pp - 1) + 1
    return min(microbatches * chunks, warmup) / chunks


def p2p(layout, micro_batch: int, seq_len: int, hidden: int, dtype_bytes: int, hardware) -> dict:
    """Per micro-batch: the activation a stage sends forward and the gradient it sends back, each
    chunk boundary once (interleaved: v of them), between rank r of a stage and rank r of the next
    (world / PP ranks apart). Each TP rank sends its 1/TP slice of the boundary activation (its
    sequence-parallel shard; Megatron's scatter-gather does the same without sequence
    parallelism), all TP ranks at once. Counted on the critical path (not overlapped with compute)."""
    from ...estimate.collectives import collective_estimate

    nbytes = micro_batch * seq_len * hidden * dtype_bytes // layout.tp
    stride = layout.world_size // layout.pp
    c = collective_estimate("send", nbytes, 2, ranks=(0, stride), hardware=hardware, name="pipeline.send")
    per_micro = 2 * layout.pp_chunks * c.seconds
    return {"bytes_per_transfer": nbytes, "placement": c.placement, "seconds_per_transfer": c.seconds,
            "transfers_per_microbatch": 2 * layout.pp_chunks, "seconds_per_microbatch": per_micro}


def schedule_report(layout, *, micro_s: float, p2p_s: float, microbatches: int, act_bytes: int,
                    stage_peak: int) -> dict:
    """The pipeline's figures: step time without the optimizer, bubble, first-stage activations."""
    pp, v = layout.pp, layout.pp_chunks
    t = micro_s + p2p_s
    held = in_flight(pp, microbatches, layout.pp_schedule, v)
    return {
        "schedule": layout.pp_schedule, "stages": pp, "chunks_per_stage": v, "microbatches": microbatches,
        "stage_micro_step_s": micro_s, "p2p_s_per_microbatch": p2p_s,
        "bubble_fraction": bubble_fraction(pp, microbatches, v),
        "bubble_s": t * microbatches * bubble_fraction(pp, microbatches, v),
        "pipeline_s": step_seconds(t, pp, microbatches, v),
        "activation_bytes_per_microbatch": act_bytes,
        "first_stage_microbatches_in_flight": held,
        # the measured stage held one micro-batch's activations at its peak; the first stage holds `held`
        "first_stage_peak_bytes_estimate": int(stage_peak + max(held - 1, 0) * act_bytes),
    }


def stage_config(config, layout):
    """The last stage's model: its decoder layers only (the rest of the model is unchanged)."""
    import copy

    if layout.pp == 1:
        return config
    stage = copy.deepcopy(config)
    text = stage.get_text_config() if hasattr(stage, "get_text_config") else stage
    text.num_hidden_layers = stage_layers(text.num_hidden_layers, layout.pp)
    for name in ("layer_types", "mlp_only_layers"):   # per-layer lists follow the layer count
        value = getattr(text, name, None)
        if isinstance(value, list) and len(value) > text.num_hidden_layers:
            setattr(text, name, value[-text.num_hidden_layers:])
    return stage

