"""The matrix-multiplication progression: out[M, N] = lhsT[K, M].T @ rhs[K, N].

(a) basic, (b) tiled with PSUM k-accumulation, (c) hoisted loads, (d) blocked free
dimension, (e) optimised (rhs resident in SBUF, lhsT streamed in double-buffered blocks).
"""
import nki
import nki.isa as nisa
import nki.language as nl

TK, TM, TN = 128, 128, 512   # contraction (partitions), stationary free, moving free


def _k_strips(src, c0, width):
    """SBUF [TK, K // TK, width]: columns c0..c0+width of src [K, *], one DMA per 128-row
    strip of the contraction dimension (a plain function, traced inside the kernel)."""
    KT = src.shape[0] // TK
    t = nl.ndarray((TK, KT, width), src.dtype, buffer=nl.sbuf)
    for k in range(KT):
        nisa.dma_copy(dst=t[:, k, :], src=src[k * TK:(k + 1) * TK, c0:c0 + width])
    return t


def _k_matmul(stationary, moving):
    """PSUM [M, N] = the sum over the K // 128 strips k of stationary[:, k, :].T @ moving[:, k, :]
    (stationary [128, KT, M], moving [128, KT, N]: _k_strips tiles or views of them)."""
    ps = nl.ndarray((stationary.shape[2], moving.shape[2]), nl.float32, buffer=nl.psum)
    for k in range(stationary.shape[1]):
        nisa.nc_matmul(dst=ps, stationary=stationary[:, k, :], moving=moving[:, k, :])
    return ps


def _evict(dst, ps):
    """PSUM accumulator -> SBUF (cast to dst's dtype) -> dst in HBM."""
    res = nl.ndarray(ps.shape, dst.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=ps)
    nisa.dma_copy(dst=dst, src=res)


@nki.jit
def matmul_basic(lhsT, rhs):
    """One nc_matmul: lhsT [<=128, <=128], rhs [<=128, <=512]."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), lhsT.dtype, buffer=nl.shared_hbm)
    s = nl.ndarray((K, M), lhsT.dtype, buffer=nl.sbuf)
    m = nl.ndarray((K, N), rhs.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=lhsT)
    nisa.dma_copy(dst=m, src=rhs)
    ps = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=s, moving=m)
    _evict(out, ps)
    return out


@nki.jit
def matmul_tiled(lhsT, rhs):
    """Loops over m (128), n (512) and k (128); k accumulates into one PSUM tile."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), lhsT.dtype, buffer=nl.shared_hbm)
    for m in range(M // TM):
        for n in range(N // TN):
            ps = nl.ndarray((TM, TN), nl.float32, buffer=nl.psum)
            for k in range(K // TK):
                s = nl.ndarray((TK, TM), lhsT.dtype, buffer=nl.sbuf)
                mv = nl.ndarray((TK, TN), rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=s, src=lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM])
                nisa.dma_copy(dst=mv, src=rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
                nisa.nc_matmul(dst=ps, stationary=s, moving=mv)     # auto-accumulate over k
            _evict(out[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], ps)
    return out


@nki.jit
def matmul_hoisted(lhsT, rhs):
    """Loads moved out of the inner loops: an lhsT column strip per m, reused for every n."""
    _, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), lhsT.dtype, buffer=nl.shared_hbm)
    for m in range(M // TM):
        s = _k_strips(lhsT, m * TM, TM)
        for n in range(N // TN):
            mv = _k_strips(rhs, n * TN, TN)
            ps = _k_matmul(s, mv)
            _evict(out[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], ps)
    return out


@nki.jit
def matmul_blocked(lhsT, rhs, block_n=4):
    """Block the free dimension: one rhs block of ``block_n`` x 512 columns is loaded once per
    m strip and feeds ``block_n`` PSUM accumulators."""
    _, M = lhsT.shape
    _, N = rhs.shape
    BN = TN * block_n
    out = nl.ndarray((M, N), lhsT.dtype, buffer=nl.shared_hbm)
    for nb in range(N // BN):
        mv = _k_strips(rhs, nb * BN, BN)
        for m in range(M // TM):
            s = _k_strips(lhsT, m * TM, TM)
            res = nl.ndarray((TM, BN), lhsT.dtype, buffer=nl.sbuf)
            for j in range(block_n):
                ps = _k_matmul(s, mv[:, :, j * TN:(j + 1) * TN])
                nisa.tensor_copy(dst=res[:, j * TN:(j + 1) * TN], src=ps)
            nisa.dma_copy(dst=out[m * TM:(m + 1) * TM, nb * BN:(nb + 1) * BN], src=res)
    return out


@nki.jit
def matmul_optimized(lhsT, rhs, block_m=4):
    """rhs resident in SBUF (loaded as whole rows: long contiguous DMA runs); lhsT streamed in
    column blocks of ``block_m`` x 128. Each block is a fresh SBUF buffer, so its DMA runs
    ahead of the Tensor engine working on the previous block (double buffering)."""
    _, M = lhsT.shape
    _, N = rhs.shape
    block_m = min(block_m, M // TM)
    BM = TM * block_m
    out = nl.ndarray((M, N), lhsT.dtype, buffer=nl.shared_hbm)
    mv = _k_strips(rhs, 0, N)
    for mb in range(M // BM):
        s = _k_strips(lhsT, mb * BM, BM)
        for m in range(block_m):
            res = nl.ndarray((TM, N), lhsT.dtype, buffer=nl.sbuf)
            for n in range(N // TN):
                ps = _k_matmul(s[:, :, m * TM:(m + 1) * TM], mv[:, :, n * TN:(n + 1) * TN])
                nisa.tensor_copy(dst=res[:, n * TN:(n + 1) * TN], src=ps)
            row = (mb * block_m + m) * TM
            nisa.dma_copy(dst=out[row:row + TM, :], src=res)
    return out
