"""The cost model's assumptions: every figure the hardware facts do not give, named.

Each is a documented default (docs/estimate.md lists them with their reasoning) that a user
can override with one environment variable, either inline or as a JSON file:

    TORCH_NEURONX_ESTIMATE_ASSUMPTIONS="matmul_efficiency=0.8,eager_launch_s=20e-6"
    TORCH_NEURONX_ESTIMATE_ASSUMPTIONS=/path/to/assumptions.json   # {"matmul_efficiency": 0.8}

or per estimate: `torch_neuronx.estimate(assumptions={"eager_launch_s": 0})`.
Unknown names and out-of-range values raise an error naming the variable and the valid names.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace

import neuron_hardware

from ..runtime import env


@dataclass(frozen=True)
class Assumptions:
    # Fraction of the TensorEngine peak a well-tiled matmul reaches: what the NKI simulator's
    # matmul_optimized reaches on trn2 (67.6 of 78.6 TFLOPS at M=N=K=2048, tests/estimate/
    # test_nki_agreement.py re-measures it); the NKI guide's C1 cost rules underlie both.
    matmul_efficiency: float = 0.86
    # Fraction of HBM bandwidth a streaming kernel sustains: the NKI simulator's double-buffered
    # DMA with 512-byte descriptor overhead on 8 KiB rows gives 0.94 per queue; allowing for
    # pipeline fill, we take 0.85 (no published figure; docs/hardware-sources.md C1 give only the peak).
    hbm_efficiency: float = 0.85
    # Fraction of the Vector/Scalar engine element rate sustained by eager elementwise ops
    # (the simulator charges a 100-cycle static overhead per 512-element instruction: 512/612).
    vector_efficiency: float = 0.84
    # Device-side cost of launching one eager op (one NEFF execution). No public figure (docs/hardware-sources.md D:
    # "not found"); vLLM-Neuron's 437 us synchronous host overhead per NEFF (docs/hardware-sources.md C4) is hidden
    # by asynchronous enqueue, so only the device-side start (DMA descriptors ~600 ns each, queue
    # and semaphore set-up) remains: we assume 10 us.
    eager_launch_s: float = 10e-6
    # Device-side cost of launching one compiled graph (one NEFF): the same basis as an eager op.
    graph_launch_s: float = 10e-6
    # Latency of one collective step (one hop) inside an instance over NeuronLink: the Neuron
    # runtime's page gives about 1-2 us per Ring hop, HBM-load dependent (docs/hardware-sources.md C5);
    # with Mesh's 2 steps, nccom-test's 1 KiB all-gather on 8/32 ranks (6-10 us, C3) agrees.
    neuronlink_step_latency_s: float = 1.5e-6
    # Latency of one step between logical cores of the same chip (through HBM by DMA).
    same_chip_step_latency_s: float = 1.0e-6
    # Latency of one collective step across instances over EFA (about 15 us per hop, the Neuron
    # runtime's inter-node page, docs/hardware-sources.md C5), and the fraction of EFA line rate a
    # collective sustains.
    efa_step_latency_s: float = 15e-6
    efa_efficiency: float = 0.8
    # Fraction of NeuronLink bandwidth a ring collective sustains (nccom-test shows busbw far below
    # link rates for small sizes; for large ones no figure for trn2 is published).
    neuronlink_efficiency: float = 0.8
    # Fixed start-up of a collective that only moves data (CC-core programming): nccom-test's 1 KiB
    # all-gather takes 6-10 us on 8 and on 32 ranks (docs/hardware-sources.md C3).
    collective_launch_s: float = 5e-6
    # Fixed start-up of a collective that reduces (all_reduce, reduce_scatter, reduce): nccom-test's
    # 2-rank all-reduce takes 58 us at 1 KiB and 68 us at 1 MiB (C3), ten times a 1 KiB all-gather:
    # the reduction's fixed cost. We take 58 us, for reduce-scatter as well (no published figure).
    # The calibration against published decode steps, whose time beyond their weights' HBM reads is
    # one small all-reduce per block, fits 50-90 us (docs/calibration.md).
    reduction_launch_s: float = 58e-6
    # Cost of one host sync (.item(), .cpu(), print of a device value) in a dry run's estimate:
    # the host waits for the queue to drain, so the next launch's synchronous host overhead is no
    # longer hidden by asynchronous enqueue: vLLM-Neuron's 437 us per NEFF execution (docs/hardware-sources.md C4).
    host_sync_s: float = 437e-6
    # A CPU fallback op (docs/op-support.md) copies its inputs device-to-host and its results
    # host-to-device over the host link: PCIe (neuron_hardware/host_link.py), of a generation and
    # width Neuron does not publish. We assume PCIe 5.0 x16 per chip, 63.0 GB/s each way.
    host_link_bytes_per_s: float = neuron_hardware.pcie_bytes_per_s(5, 16)
    # Host CPU time of a fallback op: a fixed part (the CPU op's dispatch and the allocation of its
    # host copies; no Neuron figure, PyTorch CPU ops spend ~5-20 us in the framework) plus its bytes
    # read and written at the rate one CPU op streams host memory (no published figure: 20 GB/s).
    cpu_fallback_op_s: float = 20e-6
    host_memory_bytes_per_s: float = 20e9
    # TorchNeuron eager runs asynchronously: "ops are enqueued to the device asynchronously" and
    # PyTorch synchronizes on device-to-host copies and value access (AWS Neuron docs,
    # frameworks/torch/pytorch-native-overview). 1: an op's launch overlaps the device work queued
    # before it, so only the device's idle time waiting for a launch counts, in full after a sync
    # (.item(), a copy to the host); 0: every launch is serial with the device work.
    eager_async: float = 1.0
    # Adaptive Eager Execution fuses runs of queued eager ops "based on fusion heuristics" into
    # single ops (same page; deterministic mode turns it off). The heuristics are not published;
    # we assume consecutive elementwise ops on one device fuse: one launch for the run, and a
    # tensor one op of the run produces and the next reads never makes the HBM round trip.
    # 1: on (unless torch.use_deterministic_algorithms is set); 0: every op its own kernel.
    eager_fusion: float = 1.0
    # Mixture-of-experts layers as NxD Inference runs them (estimate/moe.py, docs/moe.md). Sources:
    # NeuronX Distributed's modules/moe (model_utils.py defaults, expert_mlps_v2.py's forward) and the
    # NxD Inference guide "Deep dive: Explore Mixture of Experts (MoE) inference support for Neuron".
    # Tokens per block of the blockwise context-encoding kernel: DEFAULT_BLOCK_SIZE = 512.
    moe_block_size: float = 512
    # Token generation loads only the routed experts while tokens x top_k / experts is below this
    # (DEFAULT_SELECTIVE_LOADING_THRESHOLD = 1.0), else every expert of the rank.
    moe_selective_loading_threshold: float = 1.0
    # The blockwise kernel's DMA skipping, off by default (DEFAULT_SKIP_MODE = (False, False)):
    # 1 skips the padded token rows of a block; 1 reuses an expert's weights across its consecutive
    # blocks instead of loading them for every block.
    moe_skip_dma_token: float = 0.0
    moe_skip_dma_weight: float = 0.0
    # The kernel loops over all N provisioned blocks, padded ones included (use_shard_on_block_dynamic_while
    # and use_shard_on_intermediate_dynamic_while default False); 1: the dynamic-while kernels' early
    # exit, only the blocks that hold tokens run.
    moe_skip_padded_blocks: float = 0.0
    # A compiled graph's matmul whose operand is a broadcast copy of a smaller tensor (grouped-query
    # attention's repeated KV heads, `repeat_kv`) reads the source instead of a materialised copy:
    # the compiler folds broadcasts into its consumer's loads, and NKI's attention kernels take the
    # KV heads as stored, with a Q/KV head ratio, intermediates in SBUF (the NKI library's Attention
    # TKG and Attention Block TKG kernel pages). The fraction of a group's repeated reads served from
    # SBUF: 1, each KV head read from HBM once for its group; 0, once per query head (estimate/_broadcast.py).
    matmul_broadcast_reuse: float = 1.0
    # Serving as deployed (plan generate's deployed mode, plan/models/_serving.py). The host's share of
    # one serving step (a CTE or a TKG graph execution) that the device waits for: preparing the step's
    # inputs, launching the NEFF and reading back its token. vLLM-Neuron's async-execution design doc
    # measures 437 us of synchronous host overhead per NEFF execution (vllm-project/vllm-neuron,
    # docs/design/framework/async_execution.md); a synchronous runner (NxD Inference's async_mode
    # defaults to False, optimum-neuron's vLLM runs steps one after the other) pays it every step.
    # 0: an asynchronous runner that prepares step k+1 while step k runs.
    serving_host_step_s: float = 437e-6


DEFAULTS = Assumptions()
NAMES = tuple(f.name for f in fields(Assumptions))
SWITCHES = ("eager_async", "eager_fusion", "moe_skip_dma_token", "moe_skip_dma_weight", "moe_skip_padded_blocks")
COUNTS = ("moe_block_size",)   # whole numbers >= 1
FRACTIONS = ("matmul_broadcast_reuse",)   # shares in [0, 1]


def _bad(source: str, message: str) -> env.NeuronEnvironmentError:
    return env.NeuronEnvironmentError(f"{source}: {message}. Valid names: {', '.join(NAMES)}.")


def merge(base: Assumptions, values: dict, source: str) -> Assumptions:
    """`base` with `values` applied; every value validated (a finite number >= 0, <= 1 for efficiencies)."""
    changes = {}
    for name, raw in values.items():
        if name not in NAMES:
            raise _bad(source, f"{name!r} is not an assumption of the cost model")
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise _bad(source, f"{name}={raw!r} is not a number") from None
        if not (value >= 0 and value != float("inf")):
            raise _bad(source, f"{name}={raw!r} must be a finite number >= 0")
        if name.endswith("_bytes_per_s") and value == 0:
            raise _bad(source, f"{name}={raw!r} is a bandwidth: use a value > 0")
        if name.endswith("_efficiency") and not (0 < value <= 1):
            raise _bad(source, f"{name}={raw!r} is an efficiency: use a value in (0, 1]")
        if name in COUNTS and (value < 1 or value != int(value)):
            raise _bad(source, f"{name}={raw!r} is a count: use a whole number >= 1")
        if name in FRACTIONS and value > 1:
            raise _bad(source, f"{name}={raw!r} is a fraction: use a value in [0, 1]")
        if name in SWITCHES and value not in (0.0, 1.0):
            raise _bad(source, f"{name}={raw!r} is a switch: use 1 (on) or 0 (off)")
        changes[name] = value
    return replace(base, **changes)


def from_env() -> Assumptions:
    raw = env.get(env.ESTIMATE_ASSUMPTIONS)
    if raw is None:
        return DEFAULTS
    source = f"{env.ESTIMATE_ASSUMPTIONS}={raw!r}"
    if "=" not in raw:
        try:
            with open(raw) as f:
                values = json.load(f)
        except OSError as err:
            raise _bad(source, f"not 'name=value,...' and not a readable JSON file ({err.strerror})") from None
        except json.JSONDecodeError as err:
            raise _bad(source, f"the file is not valid JSON ({err.msg})") from None
        if not isinstance(values, dict):
            raise _bad(source, "the JSON file must hold an object of name: value")
    else:
        values = {}
        for item in raw.split(","):
            if not item.strip():
                continue
            name, sep, value = item.partition("=")
            if not sep:
                raise _bad(source, f"{item!r} is not name=value")
            values[name.strip()] = value.strip()
    return merge(DEFAULTS, values, source)


def resolve(overrides: dict | None = None) -> Assumptions:
    base = from_env()
    if overrides:
        base = merge(base, overrides, "assumptions argument")
    return base
