"""nl.matmul and nl.transpose on the Tensor engine (results in PSUM)."""
from __future__ import annotations

from ..simulator import checks as C
from .._core import buffers as B
from .._core import dtypes as dt

__all__ = ["matmul", "transpose"]


def _new(shape, dtype, buffer, api):
    from .creation import allocate
    return allocate(shape, dtype, buffer, "", api=api)


def transpose(x, dtype=None, **kw):
    """2-D partition<->free transpose of SBUF ``x`` [P, F<=128]; returns a PSUM tile [F, P]."""
    from ..isa.tensor_engine import nc_transpose
    api = "nl.transpose"
    C.tensor(x, api, "x")
    C.rank(x, 2, api, "x")
    C.buffer_in(x, ("sbuf",), api, "x", "the Tensor engine reads SBUF")
    C.max_dim(x, 1, 128, api, "x", "free size (becomes the partition dim)")
    out = _new((x.shape[1], x.shape[0]), dtype or x.dtype, B.psum, api)
    nc_transpose(out, x)
    return out


def matmul(x, y, transpose_x=False, **kw):
    """x @ y into a new fp32 PSUM tile [M, N].

    ``transpose_x=True``: x is already [K, M] (stationary, K on partitions), y is [K, N].
    Otherwise x is [M, K] and a Tensor-engine transpose is inserted first.
    """
    from ..isa.tensor_engine import check_mm_sizes, nc_matmul
    from ..isa.vector_engine import tensor_copy
    api = "nl.matmul"
    C.tensor(x, api, "x")
    C.tensor(y, api, "y")
    C.buffer_in(x, ("sbuf",), api, "x", "the Tensor engine reads SBUF")
    C.buffer_in(y, ("sbuf",), api, "y", "the Tensor engine reads SBUF")
    if not transpose_x:
        C.rank(x, 2, api, "x")
        C.max_dim(x, 0, 128, api, "x", "M (rows of x)")
        C.max_dim(x, 1, 128, api, "x", "K (columns of x, contracted)")
        xt_ps = transpose(x)
        xt = _new(xt_ps.shape, x.dtype, B.sbuf, api)
        tensor_copy(xt, xt_ps)
        x = xt
    C.same_partitions(x, y, api, "x (K)", "y (K)")
    check_mm_sizes(x, y, api)
    M = C.free_size(x)
    N = C.free_size(y)
    out = _new((M, N), dt.float32, B.psum, api)
    nc_matmul(out, x, y)
    return out
