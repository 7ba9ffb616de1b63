"""``nl.tile_size``: hardware tile limits, per target (read at access time)."""
from __future__ import annotations

from .. import _env
from ..simulator.context import current_target as _target


class _TileSize:
    """Tile limits of the current target (the running kernel's, else the env default)."""

    pmax = 128
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    psum_bank_fmax = 512          # fp32 elements per 2 KiB bank
    psum_fmax = 512               # deprecated name of psum_bank_fmax
    bn_stats_fmax = 512
    psum_min_align = 2048         # PSUM tensors start on a bank boundary
    sbuf_min_align = 4

    @property
    def psum_num_banks(self) -> int:
        return 7 if _env.dma_transpose_as_pe() else _target().psum_banks

    @property
    def sbuf_fmax_bytes(self) -> int:
        return _target().sbuf_partition_bytes

    @property
    def sbuf_fmax(self) -> int:
        return _target().sbuf_partition_bytes

    @property
    def sbuf_size_bytes(self) -> int:
        return _target().sbuf_bytes

    @property
    def total_available_sbuf_size(self) -> int:  # deprecated
        return _target().sbuf_partition_bytes

    @property
    def psum_size_bytes(self) -> int:
        return _target().psum_partition_bytes * 128

    def __repr__(self) -> str:
        return (f"tile_size(target={_target().name}, pmax=128, gemm_stationary_fmax=128, "
                f"gemm_moving_fmax=512, psum_bank_fmax=512, sbuf_fmax_bytes={self.sbuf_fmax_bytes})")


tile_size = _TileSize()
