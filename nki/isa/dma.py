"""DMA: dma_copy between HBM and SBUF (never PSUM), with dtype cast via fp32."""
from __future__ import annotations


from ..errors import raise_error
from ..simulator import checks as C
from ..simulator import engine_io as io
from ..simulator.context import current
from ..simulator.cost import contiguous_run_bytes
from .enums import dge_mode, engine, oob_mode

_PSUM_WHY = "DMA cannot access PSUM (NKI 0.3+); copy PSUM to SBUF with nisa.tensor_copy first"


def _broadcastable(src_shape, dst_shape) -> bool:
    if len(src_shape) > len(dst_shape):
        return False
    for a, b in zip(reversed(src_shape), reversed(dst_shape)):
        if a != b and a != 1:
            return False
    return True


def _dma(dst, src, instr: str, dst_name="dst", src_name="src") -> None:
    run = current(instr)
    C.tensor(dst, instr, dst_name)
    C.tensor(src, instr, src_name)
    C.buffer_in(src, ("hbm", "sbuf"), instr, src_name, _PSUM_WHY)
    C.buffer_in(dst, ("hbm", "sbuf"), instr, dst_name, _PSUM_WHY)
    reshape = False
    if src.shape != dst.shape:
        if _broadcastable(src.shape, dst.shape):
            pass
        elif dst.size < src.size:
            raise_error("err_store_dst_shape_smaller_than_other_shape",
                        f"destination {list(dst.shape)} is smaller than source {list(src.shape)}",
                        instruction=instr, operand=dst_name)
        elif dst.size == src.size:
            reshape = True
        else:
            raise_error("err_shape_mismatch",
                        f"cannot copy source {list(src.shape)} into destination {list(dst.shape)}",
                        instruction=instr, operand=src_name)
    io.check_writable(dst, instr, dst_name)
    if run.compute:
        if src.dtype == dst.dtype and src._st.np_dtype == dst._st.np_dtype:
            v = io.np_view(src)
            v = v.reshape(dst.shape) if reshape else v
            io.np_view(dst)[...] = v
            dst._st.written = True
        else:
            v = io.read(src)
            io.write(dst, v.reshape(dst.shape) if reshape else v, instr)
    else:
        dst._st.written = True
    on_chip = dst if dst.buffer.on_chip else src if src.buffer.on_chip else None
    nbytes = dst.size * max(src.itemsize, dst.itemsize)
    run_bytes = min(contiguous_run_bytes(src), contiguous_run_bytes(dst))
    rows = on_chip.shape[0] if on_chip is not None else max(1, nbytes // max(run_bytes, 1))
    run.cost.dma(instr.split(".")[-1], src, dst, nbytes, rows, run_bytes)


def dma_copy(dst, src, priority=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown,
             engine=engine.unknown, name=None, **kw):
    """Copy ``src`` to ``dst`` (HBM<->SBUF, SBUF<->SBUF, HBM<->HBM). Casts via fp32."""
    _dma(dst, src, "nisa.dma_copy")


