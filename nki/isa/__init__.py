"""nki.isa: NeuronCore instructions. ``dst`` is always the first argument; calls return None.

Engine placement (checked): Tensor reads SBUF and writes PSUM; Vector/Scalar use
SBUF/PSUM (Vector: at most one PSUM input); GpSimd uses SBUF only; DMA moves
HBM<->SBUF (never PSUM).
"""
from ..errors import NkiValidationError
from .dma import dma_copy
from .enums import (dge_mode, dma_engine, engine, get_nc_version, matmul_perf_mode, nc_version,
                    oob_mode, reduce_cmd)
from .gpsimd_engine import affine_select, iota, tensor_partition_reduce
from .scalar_engine import activation, activation_reduce
from .tensor_engine import nc_matmul, nc_transpose
from .vector_engine import (bn_aggr, bn_stats, memset, reciprocal, scalar_tensor_tensor,
                            tensor_copy, tensor_reduce, tensor_scalar, tensor_tensor)

__all__ = [
    "NkiValidationError", "dma_copy", "tensor_copy", "memset", "nc_matmul", "nc_transpose",
    "tensor_tensor", "tensor_scalar", "scalar_tensor_tensor", "tensor_reduce",
    "tensor_partition_reduce", "activation", "activation_reduce", "reciprocal", "iota",
    "affine_select", "bn_stats", "bn_aggr", "engine", "reduce_cmd", "dge_mode", "oob_mode",
    "matmul_perf_mode", "nc_version", "dma_engine", "get_nc_version",
]
# ruff: noqa: F401  (re-exports)
