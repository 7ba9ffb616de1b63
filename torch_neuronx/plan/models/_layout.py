"""Which layouts can run: instance, LNC, nodes and the parallel sizes checked against the model.

Every check names the argument that is wrong and what to choose instead, so a bad layout stops
before anything is built (and a sweep row can say why it cannot work).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import neuron_hardware


class LayoutError(ValueError):
    """A layout that cannot run this model on this instance; the message says what to choose."""


@dataclass(frozen=True)
class Layout:
    instance: str
    lnc: int
    nodes: int = 1
    tp: int = 1
    fsdp: int = 1
    dp: int = 1
    pp: int = 1
    pp_schedule: str = "1f1b"      # gpipe | 1f1b | interleaved (_pipeline.py)
    pp_chunks: int = 1             # model chunks per stage (interleaved: virtual stages per rank)
    ep: int = 1                    # expert parallel degree (MoE: experts split over EP ranks)
    cp: int = 1                    # context parallel degree (the sequence split over CP ranks, ring attention)

    @property
    def view(self) -> neuron_hardware.LogicalCoreView:
        """One logical core of the instance at this LNC: cores, HBM, bandwidths (neuron_hardware)."""
        return neuron_hardware.logical_core_view(self.instance, self.lnc, instance_from="--instance",
                                                 lnc_from="--lnc")

    @property
    def spec(self) -> neuron_hardware.InstanceSpec:
        return self.view.instance

    @property
    def cores_per_node(self) -> int:
        """Logical NeuronCores of one instance at this LNC (docs/hardware-sources.md C1/C2: chips x cores / LNC)."""
        return self.view.cores_per_instance

    @property
    def world_size(self) -> int:
        return self.nodes * self.cores_per_node

    @property
    def data_parallel(self) -> int:
        """Ranks that see different batches: FSDP shards and DP replicas both split the batch (CP
        ranks share a batch and split its sequence)."""
        return self.fsdp * self.dp

    @property
    def hbm_bytes_per_core(self) -> int:
        return self.view.hbm_bytes

    def describe(self) -> str:
        parts = [f"{self.instance} LNC={self.lnc}"]
        if self.nodes > 1:
            parts.append(f"x{self.nodes} nodes")
        parts.append(f"TP{self.tp}")
        if self.cp > 1:
            parts.append(f"CP{self.cp}")
        if self.fsdp > 1:
            parts.append(f"FSDP{self.fsdp}")
        if self.dp > 1:
            parts.append(f"DP{self.dp}")
        if self.pp > 1:
            parts.append(f"PP{self.pp} {self.pp_schedule}" + (f" x{self.pp_chunks} chunks" if self.pp_chunks > 1 else ""))
        if self.ep > 1:
            parts.append(f"EP{self.ep}")
        return " ".join(parts)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def serving_expert_parallel(layout: Layout, ep: int, config=None) -> Layout:
    """`layout` with `--ep` as a deployed `plan generate` runs it: vLLM-Neuron's `ep_degree`, a
    remapping of the TP group for the MoE layers (EP groups of TP / EP ranks that split each
    expert's intermediate size), so EP divides TP; with `config`, EP must also divide its experts.
    The message lists the EP sizes that divide both."""
    if isinstance(ep, bool) or not isinstance(ep, int) or ep < 1:
        raise LayoutError(f"--ep must be a positive integer, got {ep!r}")
    experts = _experts(getattr(config, "text_config", None) or config) if config is not None else 0
    if config is not None and ep > 1 and not experts:
        raise LayoutError(f"--ep {ep}: the model has no experts (not a mixture-of-experts config); use --ep 1")
    good = [d for d in _divisors(layout.tp) if not experts or experts % d == 0]
    if layout.tp % ep or (experts and experts % ep):
        what = f"--tp {layout.tp}" + (f" and the model's {experts} experts" if experts else "")
        raise LayoutError(f"--ep {ep} must divide {what} (generate splits the experts within the TP group, as "
                          f"vLLM-Neuron's ep_degree does); EP sizes that work: {good}")
    return replace(layout, ep=ep)


def make_layout(instance: str, lnc: int | None = None, nodes: int = 1, tp: int = 1, fsdp: int = 1,
                dp: int | None = None, pp: int = 1, pp_schedule: str = "1f1b", pp_chunks: int | None = None,
                ep: int = 1, cp: int = 1) -> Layout:
    """A checked Layout; `dp` None fills the cores left after TP x CP x FSDP x PP. Pipeline stages are
    outermost in the rank order (stage s holds ranks s x world/PP ..), as NxD and Megatron order them;
    CP ranks sit between FSDP and TP (torchtitan's order: FSDP shards over FSDP x CP)."""
    from ._pipeline import check_schedule
    try:   # the planner's own flags, never the environment: --lnc defaults to the chip's LNC
        lnc = neuron_hardware.logical_core_view(instance, lnc, instance_from="--instance", lnc_from="--lnc").lnc
    except neuron_hardware.HardwareChoiceError as err:
        raise LayoutError(str(err)) from None
    for name, value in (("--nodes", nodes), ("--tp", tp), ("--fsdp", fsdp), ("--pp", pp), ("--ep", ep),
                        ("--cp", cp)):
        if not isinstance(value, int) or value < 1:
            raise LayoutError(f"{name} must be a positive integer, got {value!r}")
    try:
        pp_chunks = check_schedule(pp, pp_schedule, pp_chunks)
    except ValueError as err:
        raise LayoutError(str(err)) from None
    if ep > 1 and (ep % tp or (fsdp * tp) % ep):
        raise LayoutError(f"--ep {ep} must be a multiple of --tp {tp} and divide --fsdp x --tp = {fsdp * tp} "
                          f"(experts are split over the ranks that split the dense layers); e.g. --ep {tp * fsdp}")
    if cp > 1 and (pp > 1 or ep > 1):
        raise LayoutError(f"--cp {cp} is planned with --tp, --fsdp and --dp (FSDP sharding over FSDP x CP, as "
                          f"torchtitan runs it), not with --pp or --ep; use --pp 1 --ep 1 or --cp 1")
    layout = Layout(instance, lnc, nodes, tp, fsdp, 1, pp)
    world = layout.world_size
    model_parallel = tp * fsdp * pp * cp
    names, sizes = ("TP x CP x FSDP", f"{tp} x {cp} x {fsdp}") if cp > 1 else ("TP x FSDP", f"{tp} x {fsdp}")
    if dp is None:
        if world % model_parallel:
            raise LayoutError(f"{names} x PP = {sizes} x {pp} = {model_parallel} does not divide the "
                              f"{world} NeuronCores of {nodes} x {instance} at LNC={lnc}; choose sizes whose "
                              f"product divides {world} (divisors: {_divisors(world)})")
        dp = world // model_parallel
    if not isinstance(dp, int) or dp < 1:
        raise LayoutError(f"--dp must be a positive integer, got {dp!r}")
    if model_parallel * dp != world:
        hint = f", e.g. --dp {world // model_parallel}" if world % model_parallel == 0 else ""
        raise LayoutError(f"{names} x DP x PP = {sizes} x {dp} x {pp} = {model_parallel * dp} ranks, but "
                          f"{nodes} x {instance} at LNC={lnc} has {world} NeuronCores "
                          f"({layout.cores_per_node} per node); choose sizes whose product is {world}{hint}")
    return Layout(instance, lnc, nodes, tp, fsdp, dp, pp, pp_schedule, pp_chunks, ep, cp)


# config attributes tensor parallelism splits (transformers' base_model_tp_plan shards heads, the MLP
# width and the vocabulary column-wise); KV heads are split or, beyond their count, replicated
TP_SPLIT = ("num_attention_heads", "intermediate_size", "vocab_size")


def kv_replication(tp: int, config) -> int:
    """How many TP ranks hold each KV head: 1 when TP splits them (TP divides the KV heads), TP / KV
    heads when TP exceeds them (each rank keeps one KV head, replicated, as NxD Inference's GQA
    sharding does when TP > KV heads). 0: neither (TP and the KV heads do not divide each other)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    kv = getattr(text, "num_key_value_heads", None) or getattr(text, "num_attention_heads", None)
    if not isinstance(kv, int) or kv % tp == 0:
        return 1
    return tp // kv if tp % kv == 0 else 0


def tp_shards_kv_heads(text) -> bool:
    """Does transformers' TP plan of the model leave each rank its share of the KV heads? A plan whose
    key projection gathers its output (Phi-3's fused `qkv_proj`: "colwise_gather_output") gives every
    rank all heads, and each rank's KV cache holds them all."""
    plan = getattr(text, "base_model_tp_plan", None) or {}
    for name, style in plan.items():
        if name.endswith(("k_proj", "qkv_proj", "kv_proj")):
            return "gather" not in str(style)
    return True


def check_model(layout: Layout, config) -> None:
    """TP must divide every dimension the TP plan splits, and divide or be a multiple of the KV
    heads; PP needs a layer per model chunk; the message lists the sizes that work."""
    text = getattr(config, "text_config", None) or config
    layers = getattr(text, "num_hidden_layers", None)
    if layout.pp > 1 and isinstance(layers, int) and layers < layout.pp * layout.pp_chunks:
        raise LayoutError(f"--pp {layout.pp} with {layout.pp_chunks} chunks per stage needs at least "
                          f"{layout.pp * layout.pp_chunks} layers; the model has num_hidden_layers={layers}: "
                          f"use a smaller --pp")
    experts = _experts(text)
    if layout.ep > 1:
        if not experts:
            raise LayoutError(f"--ep {layout.ep}: the model has no experts (not a mixture-of-experts config); "
                              f"use --ep 1")
        if experts % layout.ep:
            raise LayoutError(f"--ep {layout.ep} does not divide the model's {experts} experts; EP sizes that "
                              f"divide them: {_divisors(experts)}")
    if layout.tp == 1:
        return

    def works(d):
        return all(not isinstance(getattr(text, n, None), int) or getattr(text, n) % d == 0 for n in TP_SPLIT) \
            and kv_replication(d, text) > 0

    for name in TP_SPLIT:
        value = getattr(text, name, None)
        if isinstance(value, int) and value % layout.tp:
            good = [d for d in _divisors(layout.world_size) if works(d)]
            raise LayoutError(f"--tp {layout.tp} does not divide the model's {name}={value}; TP sizes that "
                              f"divide {', '.join(TP_SPLIT)} and the {layout.world_size} cores: {good}")
    if kv_replication(layout.tp, text) == 0:
        good = [d for d in _divisors(layout.world_size) if works(d)]
        raise LayoutError(f"--tp {layout.tp} and the model's num_key_value_heads={text.num_key_value_heads} do "
                          f"not divide each other: TP must split the KV heads or replicate them evenly; TP sizes "
                          f"that work on the {layout.world_size} cores: {good}")


def _experts(text) -> int:
    for name in ("num_experts", "num_local_experts", "n_routed_experts"):
        value = getattr(text, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return 0


def _default_microbatches(layout: Layout) -> int:
    return 1 if layout.pp == 1 else 2 * layout.pp * layout.pp_chunks


def check_batch(layout: Layout, micro_batch: int, global_batch: int | None) -> tuple[int, int]:
    """(global batch, gradient accumulation steps) = (micro x DP ranks x accum, global / (micro x DP))."""
    if micro_batch < 1:
        raise LayoutError(f"--micro-batch must be >= 1, got {micro_batch}")
    per_step = micro_batch * layout.data_parallel
    if global_batch is None:
        # a pipeline needs several micro-batches in flight: default to 2 x PP x chunks of them
        return per_step * _default_microbatches(layout), _default_microbatches(layout)
    if global_batch < 1 or global_batch % per_step:
        raise LayoutError(f"--global-batch {global_batch} is not a multiple of micro-batch x data-parallel "
                          f"ranks = {micro_batch} x {layout.data_parallel} (FSDP {layout.fsdp} x DP {layout.dp}) "
                          f"= {per_step}; use a multiple of {per_step}")
    return global_batch, global_batch // per_step
