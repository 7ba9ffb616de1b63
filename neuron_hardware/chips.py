"""Trainium chips (trn1, trn2, trn3): per-chip and per-physical-core figures with sources.

Sources (paths in aws-neuron/aws-neuron-sdk, as collected in `docs/hardware-sources.md`):
  [C1]   docs/hardware-sources.md C1 table: about-neuron/arch/neuron-hardware/{trainium,trainium2,trainium3,
         neuron-core-v2,neuron-core-v3,neuron-core-v4}.rst and nki/guides/architecture/*_arch.rst
  [C1-isa] docs/hardware-sources.md C1 "instruction-level cost model": trainium_inferentia2_arch.rst l.255-403
  [NKI]  docs/hardware-sources.md C1 "engine clocks and datapath widths" (NKI architecture guides)
  [DMA]  docs/nki.md cost-model table: per-queue DMA rates of nki/deep-dives/nki-dma-bandwidth-guide.rst
  [C2]   docs/hardware-sources.md C2 (instances, topology, network)
"""
from __future__ import annotations

from dataclasses import dataclass, field

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
T = 1e12


@dataclass(frozen=True)
class ChipSpec:
    name: str                      # "trn2"
    core_version: str              # "NeuronCore-v3"
    nc_version: str                # NKI target generation: "gen3"
    physical_cores: int            # NeuronCores per chip
    supported_lnc: tuple[int, ...]
    default_lnc: int
    hbm_bytes: int                 # per chip
    hbm_bytes_per_s: float         # per chip
    dma_bytes_per_s: float         # per chip
    # TensorEngine dense peak per *physical* core, FLOP/s, by dtype name
    tensor_flops: dict = field(default_factory=dict)
    vector_tflops_fp32: float = 0.0   # per core, as published (reference only; see estimate/_formulas.py)
    scalar_tflops_fp32: float = 0.0
    # engine clocks, GHz
    pe_ghz: float = 2.4
    dve_ghz: float = 0.96
    act_ghz: float = 1.2
    pool_ghz: float = 1.2
    partitions: int = 128          # SBUF/PSUM partitions = engine lanes
    sbuf_partition_bytes: int = 224 * KiB
    psum_partition_bytes: int = 16 * KiB
    psum_bank_bytes: int = 2 * KiB
    # DMA queues per core and their rate
    dma_engines: int = 16
    dma_engine_bytes_per_ns: float = 23.0
    dma_fixed_latency_ns: float = 1300.0
    # engine capabilities the simulator models
    dve_perf_mode: bool = True       # bf16/fp16 VectorE 4x (one input) / 2x (tensor_tensor)
    act_lowp_x2: bool = False        # ScalarE 256 elem/cycle for bf16/fp16/fp8
    fp8_double_row: bool = True
    matmul_bf16_psum_out: bool = False
    # fp8 E4M3 is OCP float8_e4m3fn (+-448), not Neuron's IEEE-style FP8_EXP4 (+-240) [A5]
    ocp_e4m3fn: bool = False
    neuronlink_bytes_per_s: float = 0.0   # per chip, chip-to-chip
    cc_cores: int = 0

    def tensor_peak(self, dtype_name: str) -> float:
        """TensorEngine FLOP/s of one physical core for a dtype name ("bfloat16", "float32", ...)."""
        try:
            return self.tensor_flops[dtype_name]
        except KeyError:
            known = ", ".join(sorted(self.tensor_flops))
            raise ValueError(f"dtype {dtype_name!r} has no TensorEngine rate on {self.name}; "
                             f"known: {known}") from None


def _peaks(bf16: float, fp8: float, fp32: float) -> dict:
    # BF16, FP16 and TF32 share the dense rate on every generation [C1 "BF16/FP16/TF32 dense"]
    return {"bfloat16": bf16, "float16": bf16, "tf32": bf16, "float8_e4m3fn": fp8,
            "float8_e5m2": fp8, "float8_e4m3fnuz": fp8, "float8_e5m2fnuz": fp8, "float32": fp32}


TRN1 = ChipSpec(
    name="trn1", core_version="NeuronCore-v2", nc_version="gen2",
    physical_cores=2, supported_lnc=(1,), default_lnc=1,                     # [C1] 2 x NC-v2
    hbm_bytes=32 * GiB, hbm_bytes_per_s=820 * GiB,                          # [C1] 32 GiB, 820 GiB/s
    dma_bytes_per_s=1.0 * T,                                                # [C1] DMA 1 TB/s/chip
    tensor_flops=_peaks(92 * T, 92 * T, 23 * T),     # [C1] NKI guide: 92 BF16/FP16/TF32/cFP8, 23 FP32
    vector_tflops_fp32=2.3, scalar_tflops_fp32=2.9,                         # [C1]
    pe_ghz=2.8, dve_ghz=1.12, act_ghz=1.4, pool_ghz=1.4,                    # [C1] engine clocks
    sbuf_partition_bytes=192 * KiB,                                         # [C1] 128 x 192 KiB
    dma_engine_bytes_per_ns=17.0,                                           # [DMA]
    dve_perf_mode=False, fp8_double_row=False,                              # [NKI] v2 widths
    neuronlink_bytes_per_s=384e9,                                           # [C1] NeuronLink-v2
    cc_cores=6,                                                             # [C1]
)

TRN2 = ChipSpec(
    name="trn2", core_version="NeuronCore-v3", nc_version="gen3",
    physical_cores=8, supported_lnc=(1, 2), default_lnc=2,                  # [C1], [C2] LNC
    hbm_bytes=96 * GiB, hbm_bytes_per_s=2.9 * T,                            # [C1] 96 GiB, 2.9 TB/s
    dma_bytes_per_s=3.5 * T,                                                # [C1]
    tensor_flops=_peaks(79 * T, 158 * T, 20 * T),    # [C1] 79 BF16, 158 FP8, 20 FP32 per core
    vector_tflops_fp32=1.0, scalar_tflops_fp32=1.2,                         # [C1]
    pe_ghz=2.4, dve_ghz=0.96, act_ghz=1.2, pool_ghz=1.2,                    # [C1]
    sbuf_partition_bytes=224 * KiB,                                         # [C1] 128 x 224 KiB
    dma_engine_bytes_per_ns=23.0,                                           # [DMA]
    neuronlink_bytes_per_s=1280e9,                                          # [C1] NeuronLink-v3
    cc_cores=16,                                                            # [C1]
)

TRN3 = ChipSpec(
    name="trn3", core_version="NeuronCore-v4", nc_version="gen4",
    physical_cores=8, supported_lnc=(1, 2), default_lnc=2,                  # [C1]
    hbm_bytes=144 * GiB, hbm_bytes_per_s=4.9 * T,                           # [C1] 144 GiB, 4.9 TB/s
    dma_bytes_per_s=4.9 * T,                                                # [C1]
    tensor_flops={**_peaks(79 * T, 315 * T, 20 * T),  # [C1] 79 BF16, 315 MXFP8, 20 FP32 per core
                  "mxfp8": 315 * T},   # [C1] OCP MXFP8/MXFP4 (e8m0 scale per 32 along K); trn1/trn2 have none
    vector_tflops_fp32=1.2, scalar_tflops_fp32=1.2,                         # [C1]
    pe_ghz=2.4, dve_ghz=1.2, act_ghz=1.2, pool_ghz=1.2,                     # [C1] TensorE 2.4, others 1.2
    sbuf_partition_bytes=256 * KiB,                                         # [C1] 32 MiB/core
    dma_engine_bytes_per_ns=33.0,                                           # [DMA]
    act_lowp_x2=True, matmul_bf16_psum_out=True,                            # [NKI] v4 widths; docs/hardware-sources.md A3
    ocp_e4m3fn=True,                # [A5] NCC_EVRF051: F8E4M3FN "natively supported on Trainium3 (Trn3)"
    neuronlink_bytes_per_s=2560e9,                                          # [C1] NeuronLink-v4
    cc_cores=16,                                                            # [C1]
)

CHIPS: dict[str, ChipSpec] = {c.name: c for c in (TRN1, TRN2, TRN3)}


def chip(name: str) -> ChipSpec:
    try:
        return CHIPS[name]
    except KeyError:
        raise ValueError(f"unknown Trainium chip {name!r}; use one of: {', '.join(CHIPS)}") from None
