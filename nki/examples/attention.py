"""Fused (causal) self-attention softmax(Q K^T * scale) V with online softmax (flash style).

q, k, v: [S, d] with d <= 128 and S a multiple of 128 (and of ``kblock``). Q and K are
transposed on the Tensor engine so d sits on the partition (contraction) axis; scores for a 128-query
tile and a ``kblock``-key block land in one PSUM bank; the causal mask is an
affine_select; exp with a running max uses the Scalar engine's accumulate registers for
the row sums; probabilities are transposed on the Tensor engine for the P @ V matmul.
"""
import nki
import nki.isa as nisa
import nki.language as nl

NEG = -1.0e30


@nki.jit
def flash_attention(q, k, v, causal=True, kblock=512):
    S, d = q.shape
    QT = nl.tile_size.pmax
    KB = min(kblock, S)
    scale = 1.0 / float(d) ** 0.5
    out = nl.ndarray((S, d), q.dtype, buffer=nl.shared_hbm)

    # K^T blocks [d, KB] (PE transposes of 128-row chunks) and V tiles [128, d], in SBUF
    kT = nl.ndarray((d, S // KB, KB), k.dtype, buffer=nl.sbuf)
    vt = nl.ndarray((QT, S // QT, d), v.dtype, buffer=nl.sbuf)
    for c in range(S // QT):
        kc = nl.ndarray((QT, d), k.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=kc, src=k[c * QT:(c + 1) * QT, :])
        kc_ps = nl.ndarray((d, QT), k.dtype, buffer=nl.psum)
        nisa.nc_transpose(dst=kc_ps, data=kc)
        j, c0 = (c * QT) // KB, (c * QT) % KB
        nisa.tensor_copy(dst=kT[:, j, c0:c0 + QT], src=kc_ps)
        nisa.dma_copy(dst=vt[:, c, :], src=v[c * QT:(c + 1) * QT, :])

    for i in range(S // QT):
        qc = nl.ndarray((QT, d), q.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=qc, src=q[i * QT:(i + 1) * QT, :])
        qT_ps = nl.ndarray((d, QT), q.dtype, buffer=nl.psum)
        nisa.nc_transpose(dst=qT_ps, data=qc)
        qT = nl.ndarray((d, QT), q.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=qT, src=qT_ps)
        del qT_ps
        m_run = nl.ndarray((QT, 1), nl.float32, buffer=nl.sbuf)
        nisa.memset(m_run, NEG)
        l_run = nl.ndarray((QT, 1), nl.float32, buffer=nl.sbuf)
        nisa.memset(l_run, 0.0)
        acc = nl.ndarray((QT, d), nl.float32, buffer=nl.sbuf)
        nisa.memset(acc, 0.0)
        last_key = (i + 1) * QT - 1
        for j in range(S // KB):
            if causal and j * KB > last_key:
                break
            s_ps = nl.ndarray((QT, KB), nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=s_ps, stationary=qT, moving=kT[:, j, :])
            s = nl.ndarray((QT, KB), nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=s, op=nl.copy, data=s_ps, scale=scale)        # evict + scale
            del s_ps
            if causal and (j + 1) * KB - 1 > i * QT:
                # keep where (i*QT + p) - (j*KB + c) >= 0
                nisa.affine_select(dst=s, pattern=[[-1, KB]], channel_multiplier=1,
                                   on_true_tile=s, on_false_value=NEG,
                                   cmp_op=nl.greater_equal, offset=i * QT - j * KB)
            m_blk = nl.ndarray((QT, 1), nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=m_blk, op=nl.maximum, data=s, axis=1, keepdims=True)
            m_new = nl.ndarray((QT, 1), nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=m_new, data1=m_run, data2=m_blk, op=nl.maximum)
            neg_m = nl.ndarray((QT, 1), nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=neg_m, data=m_new, op0=nl.multiply, operand0=-1.0)
            p = nl.ndarray((QT, KB), v.dtype, buffer=nl.sbuf)
            rowsum = nl.ndarray((QT, 1), nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=p, op=nl.exp, data=s, bias=neg_m, reduce_op=nl.add,
                            reduce_res=rowsum)
            alpha = nl.ndarray((QT, 1), nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=alpha, op=nl.exp, data=m_run, bias=neg_m)     # exp(m_old - m_new)
            nisa.scalar_tensor_tensor(dst=l_run, data=l_run, op0=nl.multiply, operand0=alpha,
                                      op1=nl.add, operand1=rowsum)
            nisa.tensor_scalar(dst=acc, data=acc, op0=nl.multiply, operand0=alpha)
            pv_ps = nl.ndarray((QT, d), nl.float32, buffer=nl.psum)
            for c in range(KB // QT):
                pT_ps = nl.ndarray((QT, QT), v.dtype, buffer=nl.psum)
                nisa.nc_transpose(dst=pT_ps, data=p[:, c * QT:(c + 1) * QT])
                pT = nl.ndarray((QT, QT), v.dtype, buffer=nl.sbuf)
                nisa.tensor_copy(dst=pT, src=pT_ps)
                del pT_ps
                nisa.nc_matmul(dst=pv_ps, stationary=pT, moving=vt[:, j * (KB // QT) + c, :])
            nisa.tensor_tensor(dst=acc, data1=acc, data2=pv_ps, op=nl.add)
            del pv_ps
            nisa.tensor_copy(dst=m_run, src=m_new)
        rl = nl.ndarray((QT, 1), nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=rl, data=l_run)
        o = nl.ndarray((QT, d), q.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=o, data=acc, op0=nl.multiply, operand0=rl)
        nisa.dma_copy(dst=out[i * QT:(i + 1) * QT, :], src=o)
    return out
