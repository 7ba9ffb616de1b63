"""RMSNorm out = a / sqrt(mean(a^2, axis=1) + eps) * g for a [R, H], g [H]; rows tiled by 128
with a min()-clamped ragged tail. Plus a LayerNorm sibling built on bn_stats / bn_aggr."""
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def rmsnorm(a, g, eps=1e-6):
    """ISA-level RMSNorm; g is loaded once and broadcast from 1 partition to 128."""
    R, H = a.shape
    P = nl.tile_size.pmax
    out = nl.ndarray((R, H), a.dtype, buffer=nl.shared_hbm)
    g_row = nl.ndarray((1, H), g.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g_row, src=g.reshape((1, H)))
    g_all = g_row.broadcast_to((P, H))
    for i in range((R + P - 1) // P):
        r0 = i * P
        r1 = min(r0 + P, R)
        p = r1 - r0
        x = nl.ndarray((P, H), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x[0:p], src=a[r0:r1])
        sq = nl.ndarray((P, H), nl.float32, buffer=nl.sbuf)
        ss = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=sq[0:p], op=nl.square, data=x[0:p], reduce_op=nl.add,
                        reduce_res=ss[0:p])
        ms = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=ms[0:p], data=ss[0:p], op0=nl.multiply, operand0=1.0 / H,
                           op1=nl.add, operand1=eps)
        rs = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rs[0:p], op=nl.rsqrt, data=ms[0:p])
        y = nl.ndarray((P, H), a.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y[0:p], data=x[0:p], op0=nl.multiply, operand0=rs[0:p])
        nisa.tensor_tensor(dst=y[0:p], data1=y[0:p], data2=g_all[0:p], op=nl.multiply)
        nisa.dma_copy(dst=out[r0:r1], src=y[0:p])
    return out


@nki.jit
def rmsnorm_nl(a, g, eps=1e-6):
    """The same with nl.load / nl.rms_norm / nl.store."""
    R, H = a.shape
    P = nl.tile_size.pmax
    out = nl.ndarray((R, H), a.dtype, buffer=nl.shared_hbm)
    g_row = nl.load(g.reshape((1, H)))
    for i in range((R + P - 1) // P):
        r0, r1 = i * P, min((i + 1) * P, R)
        x = nl.load(a[r0:r1])
        nl.store(out[r0:r1], nl.rms_norm(x, g_row, axis=1, n=H, epsilon=eps))
    return out


@nki.jit
def layernorm(a, gamma, beta, eps=1e-5):
    """LayerNorm over H with bn_stats (chunks of <= 512) and bn_aggr."""
    R, H = a.shape
    P = nl.tile_size.pmax
    F = nl.tile_size.bn_stats_fmax
    nchunk = (H + F - 1) // F
    out = nl.ndarray((R, H), a.dtype, buffer=nl.shared_hbm)
    gam = nl.load(gamma.reshape((1, H)))
    bet = nl.load(beta.reshape((1, H)))
    for i in range((R + P - 1) // P):
        r0, r1 = i * P, min((i + 1) * P, R)
        p = r1 - r0
        x = nl.ndarray((P, H), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x[0:p], src=a[r0:r1])
        stats = nl.ndarray((P, 6 * nchunk), nl.float32, buffer=nl.sbuf)
        for c in range(nchunk):
            c0, c1 = c * F, min((c + 1) * F, H)
            nisa.bn_stats(dst=stats[0:p, 6 * c:6 * (c + 1)], data=x[0:p, c0:c1])
        mv = nl.ndarray((P, 2), nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mv[0:p], data=stats[0:p])
        rstd = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=rstd[0:p], data=mv[0:p, 1:2], op0=nl.add, operand0=eps)
        nisa.activation(dst=rstd[0:p], op=nl.rsqrt, data=rstd[0:p])
        y = nl.ndarray((P, H), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y[0:p], data=x[0:p], op0=nl.subtract, operand0=mv[0:p, 0:1],
                           op1=nl.multiply, operand1=rstd[0:p])
        nisa.tensor_tensor(dst=y[0:p], data1=y[0:p], data2=gam.broadcast_to((P, H))[0:p],
                           op=nl.multiply)
        o = nl.ndarray((P, H), a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=o[0:p], data1=y[0:p], data2=bet.broadcast_to((P, H))[0:p],
                           op=nl.add)
        nisa.dma_copy(dst=out[r0:r1], src=o[0:p])
    return out
