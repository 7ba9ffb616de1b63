"""Which layouts can run: instance, LNC, nodes and the parallel sizes checked against the model.

Every check names the argument that is wrong and what to choose instead, so a bad layout stops
before anything is built (and a sweep row can say why it cannot work).
"""
from __future__ import annotations

from dataclasses import dataclass

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

    @property
    def spec(self) -> neuron_hardware.InstanceSpec:
        return neuron_hardware.INSTANCES[self.instance]

    @property
    def cores_per_node(self) -> int:
        """Logical NeuronCores of one instance at this LNC (facts C1/C2: chips x cores / LNC)."""
        return self.spec.chips * self.spec.chip.physical_cores // self.lnc

    @property
    def world_size(self) -> int:
        return self.nodes * self.cores_per_node

    @property
    def data_parallel(self) -> int:
        """Ranks that see different batches: FSDP shards and DP replicas both split the batch."""
        return self.fsdp * self.dp

    @property
    def hbm_bytes_per_core(self) -> int:
        chip = self.spec.chip
        return chip.hbm_bytes // chip.physical_cores * self.lnc

    def describe(self) -> str:
        parts = [f"{self.instance} LNC={self.lnc}"]
        if self.nodes > 1:
            parts.append(f"x{self.nodes} nodes")
        parts.append(f"TP{self.tp}")
        if self.fsdp > 1:
            parts.append(f"FSDP{self.fsdp}")
        if self.dp > 1:
            parts.append(f"DP{self.dp}")
        if self.pp > 1:
            parts.append(f"PP{self.pp}")
        return " ".join(parts)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def make_layout(instance: str, lnc: int | None = None, nodes: int = 1, tp: int = 1, fsdp: int = 1,
                dp: int | None = None, pp: int = 1) -> Layout:
    """A checked Layout; `dp` None fills the cores left after TP x FSDP x PP."""
    if instance not in neuron_hardware.INSTANCES:
        raise LayoutError(f"--instance {instance!r} is not a known instance type; use one of: "
                          f"{', '.join(sorted(neuron_hardware.INSTANCES))}")
    chip = neuron_hardware.INSTANCES[instance].chip
    if lnc is None:
        lnc = chip.default_lnc
    if lnc not in chip.supported_lnc:
        raise LayoutError(f"--lnc {lnc} is not supported on {chip.name} ({instance}); use "
                          f"{' or '.join(map(str, chip.supported_lnc))}")
    for name, value in (("--nodes", nodes), ("--tp", tp), ("--fsdp", fsdp), ("--pp", pp)):
        if not isinstance(value, int) or value < 1:
            raise LayoutError(f"{name} must be a positive integer, got {value!r}")
    if pp != 1:
        # TorchNeuron: "PP not yet supported" (docs/hardware-sources.md B); transformers' pp_size has no neuron path
        raise LayoutError(f"--pp {pp}: pipeline parallelism is not planned (TorchNeuron does not support it "
                          f"yet); use --pp 1 and spread the model with --tp and --fsdp")
    layout = Layout(instance, lnc, nodes, tp, fsdp, 1, pp)
    world = layout.world_size
    model_parallel = tp * fsdp * pp
    if dp is None:
        if world % model_parallel:
            raise LayoutError(f"TP x FSDP x PP = {tp} x {fsdp} x {pp} = {model_parallel} does not divide the "
                              f"{world} NeuronCores of {nodes} x {instance} at LNC={lnc}; choose sizes whose "
                              f"product divides {world} (divisors: {_divisors(world)})")
        dp = world // model_parallel
    if not isinstance(dp, int) or dp < 1:
        raise LayoutError(f"--dp must be a positive integer, got {dp!r}")
    if model_parallel * dp != world:
        hint = f", e.g. --dp {world // model_parallel}" if world % model_parallel == 0 else ""
        raise LayoutError(f"TP x FSDP x DP x PP = {tp} x {fsdp} x {dp} x {pp} = {model_parallel * dp} ranks, but "
                          f"{nodes} x {instance} at LNC={lnc} has {world} NeuronCores "
                          f"({layout.cores_per_node} per node); choose sizes whose product is {world}{hint}")
    return Layout(instance, lnc, nodes, tp, fsdp, dp, pp)


# config attributes tensor parallelism splits (transformers' base_model_tp_plan shards heads, KV heads,
# the MLP width and the vocabulary column-wise)
TP_SPLIT = ("num_attention_heads", "num_key_value_heads", "intermediate_size", "vocab_size")


def check_model(layout: Layout, config) -> None:
    """TP must divide every dimension the TP plan splits; the message lists the TP sizes that work."""
    if layout.tp == 1:
        return
    text = getattr(config, "text_config", None) or config
    for name in TP_SPLIT:
        value = getattr(text, name, None)
        if isinstance(value, int) and value % layout.tp:
            good = [d for d in _divisors(layout.world_size) if all(
                not isinstance(getattr(text, n, None), int) or getattr(text, n) % d == 0 for n in TP_SPLIT)]
            raise LayoutError(f"--tp {layout.tp} does not divide the model's {name}={value}; TP sizes that "
                              f"divide {', '.join(TP_SPLIT)} and the {layout.world_size} cores: {good}")


def check_batch(layout: Layout, micro_batch: int, global_batch: int | None) -> tuple[int, int]:
    """(global batch, gradient accumulation steps) = (micro x DP ranks x accum, global / (micro x DP))."""
    if micro_batch < 1:
        raise LayoutError(f"--micro-batch must be >= 1, got {micro_batch}")
    per_step = micro_batch * layout.data_parallel
    if global_batch is None:
        return per_step, 1
    if global_batch < 1 or global_batch % per_step:
        raise LayoutError(f"--global-batch {global_batch} is not a multiple of micro-batch x data-parallel "
                          f"ranks = {micro_batch} x {layout.data_parallel} (FSDP {layout.fsdp} x DP {layout.dp}) "
                          f"= {per_step}; use a multiple of {per_step}")
    return global_batch, global_batch // per_step
