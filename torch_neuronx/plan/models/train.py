"""`plan train`: real training steps of the HF model built from its config, with AdamW.

Step 1 (warm-up: creates the optimizer state) and step 2 each run one micro-batch forward and
backward and one optimizer step; step 2, the steady state (parameters + gradients + optimizer
state + activations), is the one estimated. Gradient accumulation repeats the same micro-step
`global / (micro x DP ranks)` times, so the step time is accum x micro-step + optimizer step.
"""
from __future__ import annotations

import torch

from .. import progress
from .build import build_causal_lm, local_bytes
from .layout import Layout, check_batch, check_model
from .measure import Region
from .report import base_report
from .world import fake_world


def _optimizer_state(optimizer):
    for state in optimizer.state.values():
        yield from (v for v in state.values() if isinstance(v, torch.Tensor) and v.dim() > 0)


def _zero1_optimizer(params, layout: Layout):
    """ZeRO-1: torch's ZeroRedundancyOptimizer over the DP replicas, each rank keeping the AdamW
    state of its own partition of the parameters (and broadcasting them after its step)."""
    from torch.distributed.optim import ZeroRedundancyOptimizer

    return ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.AdamW, lr=1e-5)


def zero1_check(tp: int, fsdp: int) -> None:
    """ZeRO-1 is planned over plain data parallelism only."""
    if tp > 1 or fsdp > 1:
        raise ValueError(
            f"--zero1 with --tp {tp} --fsdp {fsdp}: ZeRO-1 is planned over plain data "
            "parallelism (--tp 1 --fsdp 1 --dp N); FSDP already shards the optimizer state (with "
            "gradients and parameters), so use --fsdp N for TP x sharded layouts")


def _all_reduce_gradients(model) -> None:
    import torch.distributed as dist

    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad.div_(dist.get_world_size())


def _zero1_state_by_rank(optimizer) -> list[int]:
    """AdamW state bytes (exp_avg + exp_avg_sq) each DP rank keeps: 2 x its partition's bytes."""
    return [sum(2 * p.numel() * p.element_size() for group in groups for p in group["params"])
            for groups in optimizer._partition_parameters()]


def plan_train(config, layout: Layout, *, micro_batch: int = 1, global_batch: int | None = None,
               seq_len: int = 128, dtype: torch.dtype = torch.bfloat16, gradient_checkpointing: bool = False,
               dry_run: bool = False, zero1: bool = False) -> dict:
    """Plan one optimizer step of `layout` (rank 0 of the full world stands for every rank).
    `zero1`: the optimizer state is sharded over the DP replicas (ZeroRedundancyOptimizer)."""
    check_model(layout, config)
    global_batch, accum = check_batch(layout, micro_batch, global_batch)
    if seq_len < 1:
        raise ValueError(f"--seq-len must be >= 1, got {seq_len}")
    model = optimizer = None
    with fake_world(layout.world_size):
        region = Region(layout)
        with region:
            progress.stage("building the model and sharding it" if layout.world_size > 1 else "building the model")
            if zero1:
                zero1_check(layout.tp, layout.fsdp)
                # plain data parallelism: full replicas; gradients all-reduced after backward
                # (the bytes DDP's buckets all-reduce; DDP itself needs a real group's futures)
                model = build_causal_lm(config, dtype)
            else:
                model = build_causal_lm(config, dtype, tp=layout.tp, fsdp=layout.fsdp, dp=layout.dp)
            model.train()
            if gradient_checkpointing:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            if zero1:
                optimizer = _zero1_optimizer(model.parameters(), layout)
            else:
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
            vocab = config.get_text_config().vocab_size
            ids = torch.randint(0, vocab, (micro_batch, seq_len), device="neuron:0")

            def step():
                loss = model(input_ids=ids, labels=ids).loss / accum
                loss.backward()
                if zero1 and layout.dp > 1:
                    _all_reduce_gradients(model)
                region.mark("backward_end")
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)

            progress.stage("training (warm-up step, estimated step)", total=2, unit="step")
            step()   # warm-up: the optimizer state appears here
            progress.update(1)
            with region.timed():
                region.mark("step_start")
                step()
                region.mark("step_end")
        report = base_report(layout, config, model, region, dtype, dry_run)
        report.update({"micro_batch": micro_batch, "global_batch": global_batch, "grad_accum_steps": accum,
                       "seq_len": seq_len, "gradient_checkpointing": gradient_checkpointing, "zero1": zero1,
                       "micro_steps_run": 2, "step_time_s": None, "tokens_per_s": None,
                       "sequences_per_s": None, "mfu": None})
        if region.oom is None:
            s, b, e = region.marks["step_start"], region.marks["backward_end"], region.marks["step_end"]
            micro_s, optim_s = region.seconds(s, b), region.seconds(b, e)
            step_s = accum * micro_s + optim_s
            flops = accum * region.flops(s, b) + region.flops(b, e)
            hw = region.est.hardware
            local_optimizer = optimizer.optim if zero1 else optimizer   # ZeRO: this rank's own AdamW
            report["memory_breakdown_bytes_per_core"]["optimizer_state"] = local_bytes(_optimizer_state(local_optimizer))
            if zero1:
                report["optimizer_state_bytes_by_dp_rank"] = _zero1_state_by_rank(optimizer)
            report["memory_breakdown_bytes_per_core"]["gradients"] = report["memory_breakdown_bytes_per_core"]["parameters"]
            report.update({
                "step_time_s": step_s, "micro_step_s": micro_s, "optimizer_step_s": optim_s,
                "tokens_per_s": global_batch * seq_len / step_s if step_s else None,
                "sequences_per_s": global_batch / step_s if step_s else None,
                # every rank does this rank's FLOPs: MFU of one core is the MFU of the job
                "mfu": flops / (step_s * hw.peak_flops_bf16) if step_s else None,
                "flops_per_core": flops,
                "time_breakdown_s": region.by_category(s, e),
                "collectives": region.collectives(s, e),
            })
        del model, optimizer
    return report
