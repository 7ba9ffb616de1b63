"""Fused LSTM/GRU cells for the neuron device.

ATen's recurrent layers (`nn.LSTM`, `nn.GRU`, `nn.LSTMCell`, `nn.GRUCell`,
packed or not) call `aten::_thnn_fused_lstm_cell` / `_thnn_fused_gru_cell`
for every time step of a CUDA, XPU or PrivateUse1 input, instead of the
unfused CPU cell; in-tree only CUDA implements them. These kernels give the
neuron device the same contract, including the workspace layouts CUDA's
backward kernels read (the autograd formulas in derivatives.yaml call
`_thnn_fused_lstm_cell_backward_impl` / `_thnn_fused_gru_cell_backward` with
them). Gate arithmetic follows the CPU cell's order (biases added to their
own matmul first, then the two halves), so results match CPU to rounding.

They run below autograd on neuron tensors, so every op here is one host
kernel through the fallback; the cost is a few tens of microseconds a step.
"""
from __future__ import annotations

import torch

_LSTM_GATES, _GRU_GATES, _GRU_WORKSPACE = 4, 3, 5


def _check_cell_args(op: str, input_gates, hidden_gates, input_bias, hidden_bias,
                     prev, prev_name: str, factor: int) -> None:
    """The checks CUDA's checkSizes makes, with the same wording."""
    where = f"(while checking arguments for {op})"
    if input_gates.dim() != 2:
        raise RuntimeError(f"Expected 2-dimensional tensor, but got {input_gates.dim()}-dimensional "
                           f"tensor for argument #1 'input_gates' {where}")
    if input_gates.shape != hidden_gates.shape:
        raise RuntimeError(f"Expected tensor for argument #1 'input_gates' to have the same size as "
                           f"tensor for argument #2 'hidden_gates'; but {list(input_gates.shape)} "
                           f"does not equal {list(hidden_gates.shape)} {where}")
    gates = input_gates.shape[1]
    if input_bias is not None:
        if input_bias.dim() != 1 or input_bias.numel() != gates:
            raise RuntimeError(f"Expected argument #3 'input_bias' to be a 1-dimensional tensor of "
                               f"{gates} elements, but got shape {list(input_bias.shape)} {where}")
        if hidden_bias is None or hidden_bias.shape != input_bias.shape:
            got = None if hidden_bias is None else list(hidden_bias.shape)
            raise RuntimeError(f"Expected tensor for argument #4 'hidden_bias' to have the same size "
                               f"as argument #3 'input_bias' {list(input_bias.shape)}, got {got} {where}")
    if prev.dim() != 2 or prev.numel() != input_gates.shape[0] * gates // factor:
        raise RuntimeError(f"Expected argument #5 '{prev_name}' of shape "
                           f"[{input_gates.shape[0]}, {gates // factor}], but got {list(prev.shape)} {where}")
    tensors = [t for t in (input_gates, hidden_gates, input_bias, hidden_bias, prev) if t is not None]
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two "
                           f"devices, {', '.join(sorted(map(str, devices)))}! {where}")


def _with_bias(gates: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return gates if bias is None else gates + bias


def fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    _check_cell_args("_thnn_fused_lstm_cell", input_gates, hidden_gates, input_bias, hidden_bias,
                     cx, "prev_hidden", _LSTM_GATES)
    gates = _with_bias(hidden_gates, hidden_bias) + _with_bias(input_gates, input_bias)
    i, f, g, o = gates.chunk(_LSTM_GATES, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    hy = o * cy.tanh()
    workspace = torch.cat((i, f, g, o), 1)  # activated gates, CUDA's layout
    return hy, cy, workspace


def fused_lstm_cell_backward_impl(grad_hy, grad_cy, cx, cy, workspace, has_bias: bool):
    if grad_hy is None and grad_cy is None:
        return None, None, None
    i, f, g, o = workspace.chunk(_LSTM_GATES, 1)
    tanh_cy = cy.tanh()
    grad_c = torch.zeros_like(cy) if grad_cy is None else grad_cy
    if grad_hy is not None:
        grad_o = grad_hy * tanh_cy
        grad_c = grad_hy * o * (1 - tanh_cy * tanh_cy) + grad_c
    else:
        grad_o = torch.zeros_like(o)
    grad_gates = torch.cat((
        grad_c * g * (1 - i) * i,
        grad_c * cx * (1 - f) * f,
        grad_c * i * (1 - g * g),
        grad_o * (1 - o) * o,
    ), 1)
    grad_cx = grad_c * f
    grad_bias = grad_gates.sum(0) if has_bias else None
    return grad_gates, grad_cx, grad_bias


def fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    _check_cell_args("_thnn_fused_gru_cell", input_gates, hidden_gates, input_bias, hidden_bias,
                     hx, "prev_hidden", _GRU_GATES)
    ir, ii, in_ = _with_bias(input_gates, input_bias).chunk(_GRU_GATES, 1)
    hr, hi, hn = _with_bias(hidden_gates, hidden_bias).chunk(_GRU_GATES, 1)
    r = (hr + ir).sigmoid()
    z = (hi + ii).sigmoid()
    n = (in_ + hn * r).tanh()
    hy = (hx - n) * z + n
    workspace = torch.cat((r, z, n, hx, hn), 1)  # CUDA's layout: hn includes its bias
    return hy, workspace


def fused_gru_cell_backward(grad_hy, workspace, has_bias: bool):
    r, z, n, hx, hn = workspace.chunk(_GRU_WORKSPACE, 1)
    grad_z = grad_hy * (hx - n) * (1 - z) * z
    grad_hx = grad_hy * z
    grad_in = grad_hy * (1 - z) * (1 - n * n)
    grad_hn = grad_in * r
    grad_r = grad_in * hn * (1 - r) * r
    grad_input_gates = torch.cat((grad_r, grad_z, grad_in), 1)
    grad_hidden_gates = torch.cat((grad_r, grad_z, grad_hn), 1)
    if has_bias:
        return (grad_input_gates, grad_hidden_gates, grad_hx,
                grad_input_gates.sum(0), grad_hidden_gates.sum(0))
    return grad_input_gates, grad_hidden_gates, grad_hx, None, None


def register(lib: torch.library.Library) -> None:
    lib.impl("_thnn_fused_lstm_cell", fused_lstm_cell, "PrivateUse1")
    lib.impl("_thnn_fused_lstm_cell_backward_impl", fused_lstm_cell_backward_impl, "PrivateUse1")
    lib.impl("_thnn_fused_gru_cell", fused_gru_cell, "PrivateUse1")
    lib.impl("_thnn_fused_gru_cell_backward", fused_gru_cell_backward, "PrivateUse1")
