"""A well-tiled NKI softmax over rows (the simulator's counterpart of aten._softmax)."""
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def softmax_rows(a):
    R, H = a.shape
    P = nl.tile_size.pmax
    out = nl.ndarray((R, H), a.dtype, buffer=nl.shared_hbm)
    for i in range(R // P):
        x = nl.ndarray((P, H), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a[i * P:(i + 1) * P])
        neg_max = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=x, axis=1, negate=True)
        e = nl.ndarray((P, H), nl.float32, buffer=nl.sbuf)
        s = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=e, op=nl.exp, data=x, bias=neg_max, reduce_op=nl.add, reduce_res=s)
        r = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=r, data=s)
        y = nl.ndarray((P, H), a.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=e, op0=nl.multiply, operand0=r)
        nisa.dma_copy(dst=out[i * P:(i + 1) * P], src=y)
    return out
