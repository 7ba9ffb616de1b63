"""Per-generation NeuronCore figures for the simulator, read from the one hardware
description (`neuron_hardware`, shared with the runtime and the cost model; sources
next to each figure there).

Numbers the simulator checks against (capacities) and the cost model uses
(clocks, widths, DMA bandwidth). See docs/nki.md for how they are used and their limits.
"""
from __future__ import annotations

from dataclasses import dataclass

import neuron_hardware

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


def _target(spec: neuron_hardware.ChipSpec) -> Target:
    return Target(
        name=spec.name, nc_version=spec.nc_version, sbuf_partition_bytes=spec.sbuf_partition_bytes,
        psum_partition_bytes=spec.psum_partition_bytes, psum_bank_bytes=spec.psum_bank_bytes,
        partitions=spec.partitions, pe_ghz=spec.pe_ghz, dve_ghz=spec.dve_ghz, act_ghz=spec.act_ghz,
        pool_ghz=spec.pool_ghz, dma_engines=spec.dma_engines,
        dma_engine_bytes_per_ns=spec.dma_engine_bytes_per_ns,
        dma_fixed_latency_ns=spec.dma_fixed_latency_ns, dve_perf_mode=spec.dve_perf_mode,
        act_lowp_x2=spec.act_lowp_x2, fp8_double_row=spec.fp8_double_row,
        matmul_bf16_psum_out=spec.matmul_bf16_psum_out)


TARGETS: dict[str, Target] = {name: _target(spec) for name, spec in neuron_hardware.CHIPS.items()}


def get_target(name: str | None = None) -> Target:
    from . import _env
    return TARGETS[_env.normalize_target(name)]
