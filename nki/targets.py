"""Per-generation NeuronCore figures (from the public NKI architecture guides).

Numbers the simulator checks against (capacities) and the cost model uses
(clocks, widths, DMA bandwidth). See docs/nki.md for sources and limits.
"""
from __future__ import annotations

from dataclasses import dataclass

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True)
class Target:
    name: str              # trn1 / trn2 / trn3
    nc_version: str        # gen2 / gen3 / gen4
    sbuf_partition_bytes: int
    psum_partition_bytes: int = 16 * KiB
    psum_bank_bytes: int = 2 * KiB
    partitions: int = 128
    # clocks in GHz
    pe_ghz: float = 2.4
    dve_ghz: float = 0.96
    act_ghz: float = 1.2
    pool_ghz: float = 1.2
    # DMA: engines per core and bytes/ns per engine
    dma_engines: int = 16
    dma_engine_bytes_per_ns: float = 23.0
    dma_fixed_latency_ns: float = 1300.0
    # engine capabilities
    dve_perf_mode: bool = True          # bf16/fp16 4x (copy/scalar), 2x (tensor_tensor)
    act_lowp_x2: bool = False           # ScalarE 256 elem/cycle for bf16/fp16/fp8 (v4)
    fp8_double_row: bool = True
    matmul_bf16_psum_out: bool = False  # v4 may write bf16 matmul results to PSUM

    @property
    def sbuf_bytes(self) -> int:
        return self.sbuf_partition_bytes * self.partitions

    @property
    def psum_banks(self) -> int:
        return self.psum_partition_bytes // self.psum_bank_bytes

    @property
    def pe_peak_tflops_bf16(self) -> float:
        # 128x128 MACs per PE cycle, 2 flops each
        return 128 * 128 * 2 * self.pe_ghz / 1e3


TARGETS: dict[str, Target] = {
    "trn1": Target("trn1", "gen2", 192 * KiB, pe_ghz=2.8, dve_ghz=1.12, act_ghz=1.4,
                   pool_ghz=1.4, dma_engine_bytes_per_ns=17.0, dve_perf_mode=False,
                   fp8_double_row=False),
    "trn2": Target("trn2", "gen3", 224 * KiB),
    "trn3": Target("trn3", "gen4", 256 * KiB, dve_ghz=1.2, dma_engine_bytes_per_ns=33.0,
                   act_lowp_x2=True, matmul_bf16_psum_out=True),
}


def get_target(name: str | None = None) -> Target:
    from . import _env
    return TARGETS[_env.normalize_target(name)]
