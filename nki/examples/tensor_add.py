"""Tensor addition c = a + b: one-tile hello world, tiled, and SPMD variants."""
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def tensor_add_tile(a, b):
    """One tile (<= 128 rows) with nl.load / nl.add / nl.store."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.load(a), nl.load(b)))
    return out


@nki.jit
def tensor_add_tiled(a, b):
    """[M, N] with M % 128 == 0 and N % 512 == 0: a double loop over 128 x 512 tiles."""
    M, N = a.shape
    TP, TF = nl.tile_size.pmax, 512
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    for m in range(M // TP):
        for n in range(N // TF):
            rows, cols = slice(m * TP, (m + 1) * TP), slice(n * TF, (n + 1) * TF)
            at = nl.ndarray((TP, TF), a.dtype, buffer=nl.sbuf)
            bt = nl.ndarray((TP, TF), b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=at, src=a[rows, cols])
            nisa.dma_copy(dst=bt, src=b[rows, cols])
            ct = nl.ndarray((TP, TF), a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=ct, data1=at, data2=bt, op=nl.add)
            nisa.dma_copy(dst=out[rows, cols], src=ct)
    return out


@nki.jit
def tensor_add_spmd(a, b):
    """One 128 x 512 tile per program; launch as ``tensor_add_spmd[M // 128, N // 512](a, b)``."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    i, j = nl.program_id(0), nl.program_id(1)
    rows, cols = slice(i * 128, (i + 1) * 128), slice(j * 512, (j + 1) * 512)
    at = nl.load(a[rows, cols])
    bt = nl.load(b[rows, cols])
    nl.store(out[rows, cols], nl.add(at, bt))
    return out
