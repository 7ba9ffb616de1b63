"""RMSNorm forward as an NKI kernel (current dialect, nki 0.3-0.6).

    out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w

for x [N, D] in HBM and w [D]. Rows map to the 128 SBUF partitions, one tile of up to 128
rows per iteration (the last tile may be ragged); D lies along the free axis. The sum of
squares is taken in fp32 whatever the input dtype; the output has x's dtype.
"""
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def rmsnorm_fwd(x, w, eps=1e-6):
    N, D = x.shape
    P = nl.tile_size.pmax
    out = nl.ndarray((N, D), x.dtype, buffer=nl.shared_hbm)

    # The weight row is loaded once onto one partition and read through a stride-0
    # partition broadcast by every tile.
    w_row = nl.ndarray((1, D), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_row, src=w.reshape((1, D)))
    w_all = w_row.broadcast_to((P, D))

    for t in nl.affine_range((N + P - 1) // P):
        r0 = t * P
        r1 = min(r0 + P, N)
        rows = r1 - r0
        xt = nl.load(x[r0:r1], dtype=nl.float32)                       # [rows, D] fp32
        ss = nl.sum(nl.square(xt), axis=1, keepdims=True)              # [rows, 1]
        inv = nl.rsqrt(nl.add(nl.multiply(ss, 1.0 / D), eps))          # 1 / rms
        y = nl.multiply(nl.multiply(xt, inv), w_all[0:rows], dtype=x.dtype)
        nl.store(out[r0:r1], y)
    return out
