"""`plan train`: real training steps of the HF model built from its config, with AdamW.

Step 1 (warm-up: creates the optimizer state) and step 2 each run one micro-batch forward and
backward and one optimizer step; step 2, the steady state (parameters + gradients + optimizer
state + activations), is the one estimated. Gradient accumulation repeats the same micro-step
`global / (micro x DP ranks)` times, so the step time is accum x micro-step + optimizer step.
"""
from __future__ import annotations

import contextlib
import torch

from . import _context_parallel as context_parallel
from . import _pipeline as pipeline
from . import _recompute as recompute
from . import _routing as moe_routing
from . import _sequence_parallel as seq_parallel
from . import _tasks as tasks
from . import _train_compile as train_compile
from .. import _progress as progress
from ._build import (build_causal_lm, local_bytes, padded_for_tp, padding_fields, parameter_count,
                     training_vocab_multiple)
from ._layout import Layout, check_batch, check_model
from ._measure import Region
from ._report import base_report
from ._throughput import throughput
from ._world import fake_world


def _optimizer_state(optimizer):
    for state in optimizer.state.values():
        yield from (v for v in state.values() if isinstance(v, torch.Tensor) and v.dim() > 0)


def _zero1_optimizer(params, layout: Layout):
    """ZeRO-1: torch's ZeroRedundancyOptimizer over the DP replicas, each rank keeping the AdamW
    state of its own partition of the parameters (and broadcasting them after its step)."""
    from torch.distributed.optim import ZeroRedundancyOptimizer

    return ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.AdamW, lr=1e-5)


def _is_dtensor(t) -> bool:
    return hasattr(t, "to_local")


def _local(t):
    return t.to_local() if _is_dtensor(t) else t


class _AdamWByKind:
    """AdamW over a TP model whose parameters are DTensors and plain tensors (replicated norms):
    torch's foreach AdamW cannot mix the two in one list, so each kind gets its own AdamW."""

    def __init__(self, params, **kwargs):
        params = list(params)
        kinds = [[p for p in params if _is_dtensor(p)], [p for p in params if not _is_dtensor(p)]]
        self.optimizers = [torch.optim.AdamW(group, **kwargs) for group in kinds if group]

    @property
    def state(self):
        return {k: v for o in self.optimizers for k, v in o.state.items()}

    def step(self):
        from .._session import active

        run = active()   # the dry run's step clock counts the AdamWs' steps as one
        with run.steps.one_step() if run is not None else contextlib.nullcontext():
            for o in self.optimizers:
                o.step()

    def zero_grad(self, set_to_none: bool = True):
        for o in self.optimizers:
            o.zero_grad(set_to_none=set_to_none)


def _adamw(params):
    params = list(params)
    if len({_is_dtensor(p) for p in params}) > 1:
        return _AdamWByKind(params, lr=1e-5)
    return torch.optim.AdamW(params, lr=1e-5)


class _Zero1Shard:
    """ZeRO-1 over the DP replicas of a TP (or pipeline) layout, as NxD Training's ZeRO-1 optimizer
    runs it: every rank keeps the AdamW state of 1/DP of each of its (TP-local) parameters, flat,
    and updates that slice; gradients are reduce-scattered and the updated parameters all-gathered
    over the DP group. This is rank 0's slice (the largest when a size does not divide): a view of
    the parameter's own storage, so only the AdamW state is new memory."""

    def __init__(self, params, dp: int):
        self.pairs = []
        for p in params:
            flat = _local(p).detach().reshape(-1)
            size = -(-flat.numel() // dp)
            self.pairs.append((p, torch.nn.Parameter(flat[:size]), size))
        self.optim = torch.optim.AdamW([s for _, s, _ in self.pairs], lr=1e-5)
        self.state = self.optim.state

    def step(self):
        for p, shard, size in self.pairs:
            if p.grad is not None:
                shard.grad = _local(p.grad).reshape(-1)[:size]
        self.optim.step()

    def zero_grad(self, set_to_none: bool = True):
        for p, shard, _ in self.pairs:
            shard.grad = None
            p.grad = None

    def local_bytes(self) -> tuple[int, int]:
        """(bytes of this rank's parameters, bytes of its gradients) the DP collectives move."""
        total = sum(_local(p).numel() * _local(p).element_size() for p, _, _ in self.pairs)
        return total, total


def _record_zero1_collectives(layout, nbytes: int) -> None:
    """ZeRO-1's DP traffic of one optimizer step: reduce-scatter of the gradients, all-gather of
    the updated parameters, over the DP group of rank 0 (TP innermost: ranks 0, TP, 2 TP, ...),
    delivered to every active recorder (the timed region, the dry run's own estimate)."""
    from ...estimate.collectives import deliver

    ranks = tuple(k * layout.tp for k in range(layout.dp))
    for kind in ("reduce_scatter", "all_gather"):
        deliver(kind, nbytes, layout.dp, ranks=ranks, name=f"zero1.{kind}", device=0)


def _record_dp_all_reduce(layout, nbytes: int) -> None:
    """The DP gradient all-reduce of one optimizer step of a TP x DP layout: gradient accumulation
    keeps the micro-steps' gradients local and the replicas all-reduce them once, before the
    optimizer (NxD Training; DDP's no_sync), over the DP group of rank 0 (ranks 0, TP, 2 TP, ...)."""
    from ...estimate.collectives import deliver

    ranks = tuple(k * layout.tp for k in range(layout.dp))
    deliver("all_reduce", nbytes, layout.dp, ranks=ranks, name="dp.all_reduce", device=0)


def sequence_parallel_note(layout: Layout, config, requested: bool) -> str | None:
    """Why sequence parallelism is off for this layout (None: it is on)."""
    if not requested:
        return "off (--no-sequence-parallel)"
    if layout.tp < 2:
        return "off: no tensor parallelism (--tp 1)"
    if layout.fsdp > 1 or layout.ep > 1 or layout.cp > 1:
        return "off: planned with TP x DP, ZeRO-1 and PP only (not with --fsdp, --ep or --cp)"
    text = config.get_text_config()
    if getattr(text, "num_local_experts", None) or getattr(text, "num_experts", None):
        return "off: a mixture-of-experts model"
    return None


def zero1_check(tp: int, fsdp: int) -> None:
    """ZeRO-1 shards the optimizer state over DP replicas; FSDP already shards it."""
    if fsdp > 1:
        raise ValueError(
            f"--zero1 with --fsdp {fsdp}: FSDP already shards the optimizer state (with gradients and "
            "parameters); use --zero1 with --tp N --dp M (NxD Training's TP x ZeRO-1) or --fsdp alone")


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
               dry_run: bool = False, zero1: bool = False, sequence_parallel: bool = True, task: str = "auto",
               activation_recompute: str | None = None, make_vocab_size_divisible_by: int | None = None,
               torch_compile: bool = False, routing=None) -> dict:
    """Plan one optimizer step of `layout` (rank 0 stands for every rank of its stage).
    `zero1`: the optimizer state is sharded over the DP replicas. With `layout.pp` > 1 the last
    pipeline stage runs (_pipeline.py) and the schedule adds the bubble and the stage transfers.
    `sequence_parallel` (default on with TP, as NxD Training runs TP): norms and residuals on
    1/TP of the sequence, a vocabulary-parallel loss (_sequence_parallel.py); off for layouts it is
    not planned with (the report's `sequence_parallel_note` says why). `task`: what the model
    trains as (_tasks.py: causal-lm, masked-lm, image-classification; auto from the config).
    `activation_recompute` none, full or selective (_recompute.py; `gradient_checkpointing` is
    full). The vocabulary is padded as Megatron pads it when TP does not divide it, or to a
    multiple of `make_vocab_size_divisible_by` x TP (_build.training_vocab_multiple).
    `torch_compile`: the model runs as torch.compile(backend="neuron") (_train_compile.py).
    `routing` (a _routing.Routing or its --routing text): where a MoE config's routers send tokens,
    balanced by default."""
    mode = recompute.check(activation_recompute or ("full" if gradient_checkpointing else "none"))
    original = config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    multiple = training_vocab_multiple(getattr(text, "vocab_size", None), layout.tp, make_vocab_size_divisible_by)
    config = padded_for_tp(config, layout.tp, heads=False, vocab_multiple=multiple)
    task = tasks.pick(config, task)
    model_class = tasks.model_class(config, task)
    tasks.check(config, task, layout, seq_len)
    check_model(layout, config)
    routing = moe_routing.as_routing(routing)
    global_batch, accum = check_batch(layout, micro_batch, global_batch)
    if seq_len < 1:
        raise ValueError(f"--seq-len must be >= 1, got {seq_len}")
    if zero1:
        zero1_check(layout.tp, layout.fsdp)
    context_parallel.check(layout, seq_len, zero1)
    plain_zero1 = zero1 and layout.tp == 1 and layout.pp == 1   # torch's ZeroRedundancyOptimizer
    stage = pipeline.stage_config(config, layout)
    # TP x DP without FSDP: the program runs over the TP group and the DP collectives (ZeRO-1's
    # reduce-scatter + all-gather, or the gradient all-reduce) are costed once per optimizer step
    tp_dp = not plain_zero1 and layout.tp > 1 and layout.fsdp == 1 and layout.ep == 1 and layout.cp == 1
    sp_note = sequence_parallel_note(layout, config, sequence_parallel)
    sp = sp_note is None and (zero1 or tp_dp)
    # the ranks whose collectives this program runs: a pipeline stage (PP outermost), or the TP group
    world = layout.tp if (zero1 and not plain_zero1) or tp_dp else layout.world_size // layout.pp
    model = optimizer = runner = metrics0 = routed = None
    with fake_world(world):
        region = Region(layout, "train")
        with region:
            progress.stage("building the model and sharding it" if layout.world_size > 1 else "building the model")
            if plain_zero1:
                # plain data parallelism: full replicas; gradients all-reduced after backward
                # (the bytes DDP's buckets all-reduce; DDP itself needs a real group's futures)
                model = build_causal_lm(stage, dtype, model_class=model_class)
            elif zero1 or tp_dp:
                model = build_causal_lm(stage, dtype, tp=layout.tp, sequence_parallel=sp, model_class=model_class)
                if sp and not getattr(model, "_sequence_parallel", False):
                    sp, sp_note = False, "off: not a Llama-style decoder (q/k/v/o, gate/up/down, two norms per layer)"
            else:   # FSDP shards over the FSDP x CP ranks (_context_parallel.py)
                model = build_causal_lm(stage, dtype, tp=layout.tp, fsdp=layout.fsdp * layout.cp, dp=layout.dp,
                                        ep=layout.ep, model_class=model_class)
            model.train()
            routed = moe_routing.install(model, routing)   # the stated routing, not the placeholders' (_routing.py)
            recompute.apply(model, mode)
            runner = train_compile.compiled(model) if torch_compile else model
            if plain_zero1:
                optimizer = _zero1_optimizer(model.parameters(), layout)
            elif zero1:
                optimizer = _Zero1Shard(model.parameters(), layout.dp)
            else:
                optimizer = _adamw(model.parameters())
            batch = tasks.inputs(config, task, micro_batch, seq_len, dtype, "neuron:0")
            ids, labels, cp_mesh = batch.get("input_ids"), batch["labels"], None
            if layout.cp > 1:   # each rank's share of the ids and labels (_context_parallel.py)
                context_parallel.attention_check(model)
                cp_mesh = context_parallel.cp_mesh(layout)
                labels = batch["labels"] = ids.clone()
            held = {"activations": 0}

            def step(timed: bool):
                before = torch.neuron.memory_allocated(0)
                with seq_parallel.loss_context(model), \
                        context_parallel.sharded_sequence(cp_mesh, ids, labels):
                    loss = runner(**batch).loss / accum
                    if timed:   # one micro-batch's activations held for its backward (pipeline memory)
                        held["activations"] = torch.neuron.memory_allocated(0) - before
                    loss.backward()
                if plain_zero1 and layout.dp > 1:
                    _all_reduce_gradients(model)
                region.mark("backward_end")
                if zero1 and not plain_zero1 and layout.dp > 1:
                    _record_zero1_collectives(layout, optimizer.local_bytes()[1])
                elif tp_dp and layout.dp > 1:
                    _record_dp_all_reduce(layout, local_bytes(p.grad for p in model.parameters()))
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)

            progress.stage("training (warm-up step, estimated step)", total=2, unit="step")
            metrics0 = train_compile.metrics()
            step(False)   # warm-up: the optimizer state appears here (and a compiled step's graphs)
            progress.update(1)
            with region.timed():
                region.mark("step_start")
                step(True)
                region.mark("step_end")
        report = base_report(layout, stage, model, region, dtype, dry_run)
        if layout.pp > 1 or config is not original or report["parameters"] is None:
            # every stage's, the real (unpadded) model's, and stated when the model did not fit
            report["parameters"] = parameter_count(original, model_class)
        report.update(padding_fields(original, config))
        tokens = tasks.tokens_per_sequence(config, task, seq_len)
        report.update({"task": task, "auto_class": tasks.AUTO_CLASSES[task], "activation_recompute": mode,
                       "torch_compile": torch_compile,
                       "compiled_graphs": train_compile.graphs(metrics0, region) if torch_compile else None})
        if task == "image-classification":
            report["image_size"] = config.image_size
        if routed:
            report["moe"] = moe_routing.report_section(
                stage, routing, micro_batch * seq_len // layout.cp // (layout.tp if layout.ep > 1 else 1), layout)
        report.update({"micro_batch": micro_batch, "global_batch": global_batch, "grad_accum_steps": accum,
                       "seq_len": tokens, "gradient_checkpointing": mode == "full", "zero1": zero1,
                       "sequence_parallel": sp, "sequence_parallel_note": sp_note,
                       "micro_steps_run": 2, "step_time_s": None, "tokens_per_s": None,
                       "sequences_per_s": None, "mfu": None, "flops_per_core": None, "flops_per_token": None})
        if region.oom is None:
            s, b, e = region.marks["step_start"], region.marks["backward_end"], region.marks["step_end"]
            micro_s, optim_s = region.seconds(s, b), region.seconds(b, e)
            flops = accum * region.flops(s, b) + region.flops(b, e)
            hw = region.est.hardware
            if layout.pp > 1:
                text = config.get_text_config()
                link = pipeline.p2p(layout, micro_batch, seq_len, text.hidden_size, dtype.itemsize, hw)
                sched = pipeline.schedule_report(layout, micro_s=micro_s, p2p_s=link["seconds_per_microbatch"],
                                                 microbatches=accum, act_bytes=held["activations"],
                                                 stage_peak=report["peak_hbm_bytes_per_core"])
                report["pipeline"] = {**sched, "p2p": link}
                step_s = sched["pipeline_s"] + optim_s
            else:
                step_s = accum * micro_s + optim_s
            local_optimizer = optimizer.optim if zero1 else optimizer   # ZeRO: this rank's own AdamW
            report["memory_breakdown_bytes_per_core"]["optimizer_state"] = local_bytes(_optimizer_state(local_optimizer))
            if plain_zero1:
                report["optimizer_state_bytes_by_dp_rank"] = _zero1_state_by_rank(optimizer)
            report["memory_breakdown_bytes_per_core"]["gradients"] = report["memory_breakdown_bytes_per_core"]["parameters"]
            report.update(throughput(flops_per_core=flops, step_s=step_s, tokens_per_step=global_batch * tokens,
                                     sequences_per_step=global_batch, cores=layout.world_size,
                                     peak_flops_per_core=hw.peak_flops_bf16))
            report.update({
                "micro_step_s": micro_s, "optimizer_step_s": optim_s,
                "flops_by_category_per_micro_step": region.flops_by_category(s, b),
                "bytes_by_category_per_micro_step": region.bytes_by_category(s, b),
                "vector_bytes_by_module_per_micro_step": _vector_bytes_by_module(region.est.events[s:b]),
                "time_breakdown_s": region.by_category(s, e),
                "roofline": region.roofline(s, e),
                "collectives": region.collectives(s, e),
            })
        del model, optimizer, runner
    return report


def _vector_bytes_by_module(events) -> dict[str, int]:
    """HBM bytes of the Vector/Scalar-engine ops (elementwise, reductions) per kind of innermost
    module (its last path component, layer numbers dropped: "input_layernorm", "mlp", "layers" for
    the residual adds of a decoder layer), so a report shows where the norms' and residuals' work goes."""
    import re

    out: dict[str, int] = {}
    for e in events:
        if e.category in ("elementwise", "reduction") and e.bytes:
            inner = max(e.modules, key=lambda n: (n.count("."), len(n))) if e.modules else "Global"
            kind = re.sub(r"\.\d+", "", inner).rsplit(".", 1)[-1]
            out[kind] = out.get(kind, 0) + e.bytes
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))
