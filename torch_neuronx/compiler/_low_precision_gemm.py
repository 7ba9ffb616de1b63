"""bf16/fp16 GEMMs of compiled neuron graphs with fp32 accumulation (post-grad FX pass).

Where the host GEMM policy (torch_neuronx/runtime/host_gemm.py) says fp32 for a
dtype, each mm / addmm / bmm / baddbmm of that dtype (and CPU flash attention and
convolution, forward and backward, whose inner GEMMs are the dtype's GEMMs) becomes
convert(operands -> fp32), the same op in fp32, convert(result -> dtype): the
eager kernels' computation (csrc/kernels_matmul.cpp). Inductor then runs the
extern GEMM in fp32 and fuses each conversion into the kernel that produces or
consumes the tensor (a graph input's conversion is a kernel of its own).

A GEMM with at most SMALL_M rows (decode: one token per sequence) is memory-bound: converting
its weight to fp32 on every call would read and write the weight once more than the GEMM
itself. Such a GEMM becomes a multiply and an fp32 sum instead, which Inductor generates as one
C++ reduction kernel reading the bf16/fp16 weight once (still fp32 accumulation and one
rounding; the summation order is Inductor's, so elements may differ from an fp32 GEMM's in the
last bit).

One difference from eager remains, Inductor's own: where a GEMM's rounded result is
converted back to fp32 inside the same fused C++ kernel (one GEMM feeding the next),
Inductor's C++ code generation reuses the unrounded fp32 value, as it does for every
bf16/fp16 value a fused kernel stores and reads again (pytorch/pytorch#115260).
"""
from __future__ import annotations

import operator

import torch

from ..runtime import host_gemm

aten, prims = torch.ops.aten, torch.ops.prims

# op -> positions of its tensor operands
_GEMMS = {
    aten.mm.default: (0, 1),
    aten.bmm.default: (0, 1),
    aten.addmm.default: (0, 1, 2),
    aten.baddbmm.default: (0, 1, 2),
    aten.convolution.default: (0, 1, 2),   # im2col + the dtype's GEMM on the CPU
}


SMALL_M = 4


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _gemm_dtype(node, dtypes) -> torch.dtype | None:
    """The one low-precision dtype of the node's operands and result when the policy converts it."""
    if node.op != "call_function" or node.target not in _GEMMS:
        return None
    vals = [_val(a) for i, a in enumerate(node.args) if i in _GEMMS[node.target] and a is not None]
    vals += [_val(v) for k, v in node.kwargs.items() if k == "bias" and v is not None]
    out = _val(node)
    if not isinstance(out, torch.Tensor) or out.device.type != "neuron" or out.dtype not in dtypes:
        return None
    if not vals or any(not isinstance(v, torch.Tensor) or v.dtype != out.dtype for v in vals):
        return None
    return out.dtype


def _convert(graph, node, dtype):
    new = graph.call_function(prims.convert_element_type.default, (node, dtype))
    new.meta["val"] = prims.convert_element_type.default(node.meta["val"], dtype)
    return new


def _call(graph, target, args, kwargs=None):
    node = graph.call_function(target, tuple(args), kwargs or {})
    node.meta["val"] = target(*[_val(a) if isinstance(a, torch.fx.Node) else a for a in args], **(kwargs or {}))
    return node


def _small_m(node) -> bool:
    """mm / addmm (beta = alpha = 1) / bmm whose left operand has at most SMALL_M rows."""
    if node.target is aten.addmm.default:
        if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1 or len(node.args) > 3:
            return False
        left = node.args[1]
    elif node.target in (aten.mm.default, aten.bmm.default):
        left = node.args[0]
    else:
        return False
    rows = _val(left).shape[-2]
    return isinstance(rows, int) and rows <= SMALL_M


def _as_reduction(graph, node, dtype):
    """sum(a[..., :, :, None] * b[..., None, :, :], dim=-2) in fp32, rounded once (+ bias for addmm)."""
    if node.target is aten.addmm.default:
        bias, a, b = node.args
    else:
        bias, (a, b) = None, node.args
    a32, b32 = _convert(graph, a, torch.float32), _convert(graph, b, torch.float32)
    prod = _call(graph, aten.mul.Tensor, [_call(graph, aten.unsqueeze.default, [a32, -1]),
                                          _call(graph, aten.unsqueeze.default, [b32, -3])])
    total = _call(graph, aten.sum.dim_IntList, [prod, [-2]])
    if bias is not None:
        total = _call(graph, aten.add.Tensor, [total, _convert(graph, bias, torch.float32)])
    return total


# Ops with tuple results (read through getitem) whose inner GEMMs are the dtype's GEMMs:
# CPU flash attention and the convolution backward.
_TUPLE_OPS = (aten._scaled_dot_product_flash_attention_for_cpu.default,
              aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
              aten.convolution_backward.default)


def _attention_dtype(node, dtypes) -> torch.dtype | None:
    if node.op != "call_function" or node.target not in _TUPLE_OPS:
        return None
    first = _val(node.args[0])   # the query, or the incoming gradient of a backward
    if not isinstance(first, torch.Tensor) or first.device.type != "neuron" or first.dtype not in dtypes:
        return None
    if not all(u.target is operator.getitem for u in node.users):
        return None
    return first.dtype


def _rewrite_attention(graph, node, dtype) -> None:
    """The op on fp32 copies of its operands of `dtype`; each result of `dtype` rounded once."""
    def wide_arg(a):
        v = _val(a)
        return _convert(graph, a, torch.float32) if isinstance(v, torch.Tensor) and v.dtype == dtype else a

    with graph.inserting_before(node):
        args = [wide_arg(a) if isinstance(a, torch.fx.Node) else a for a in node.args]
        kwargs = {k: wide_arg(v) if isinstance(v, torch.fx.Node) else v for k, v in node.kwargs.items()}
        wide = _call(graph, node.target, args, kwargs)
    for user in list(node.users):
        index = user.args[1]
        with graph.inserting_before(user):
            item = _call(graph, operator.getitem, [wide, index])
            low = isinstance(_val(user), torch.Tensor) and _val(user).dtype == dtype
            result = _convert(graph, item, dtype) if low else item
        user.replace_all_uses_with(result)
        graph.erase_node(user)
    graph.erase_node(node)


def rewrite(graph: torch.fx.Graph, dtypes) -> int:
    """Rewrite the graph's GEMMs of `dtypes` to fp32 accumulation; returns how many."""
    if not dtypes:
        return 0
    count = 0
    for node in list(graph.nodes):
        attention = _attention_dtype(node, dtypes)
        if attention is not None:
            _rewrite_attention(graph, node, attention)
            count += 1
            continue
        dtype = _gemm_dtype(node, dtypes)
        if dtype is None:
            continue
        positions = _GEMMS[node.target]
        with graph.inserting_before(node):
            if _small_m(node):
                narrow = _convert(graph, _as_reduction(graph, node, dtype), dtype)
                node.replace_all_uses_with(narrow)
                graph.erase_node(node)
                count += 1
                continue
            args = [(_convert(graph, a, torch.float32) if i in positions and isinstance(a, torch.fx.Node) else a)
                    for i, a in enumerate(node.args)]
            kwargs = {k: (_convert(graph, v, torch.float32) if k == "bias" and isinstance(v, torch.fx.Node) else v)
                      for k, v in node.kwargs.items()}
            if "out_dtype" in kwargs:
                kwargs["out_dtype"] = None
            wide = graph.call_function(node.target, tuple(args), kwargs)
            wide.meta["val"] = node.target(*[_val(a) if isinstance(a, torch.fx.Node) else a for a in args],
                                           **{k: _val(v) if isinstance(v, torch.fx.Node) else v
                                              for k, v in kwargs.items()})
            narrow = _convert(graph, wide, dtype)
        for key in ("stack_trace", "nn_module_stack", "original_aten"):
            if key in node.meta:
                wide.meta[key] = node.meta[key]
        node.replace_all_uses_with(narrow)
        graph.erase_node(node)
        count += 1
    return count


def run(gm_or_graph) -> int:
    """The pass as Inductor calls it (a GraphModule or a Graph), with the policy in force."""
    graph = gm_or_graph.graph if isinstance(gm_or_graph, torch.fx.GraphModule) else gm_or_graph
    count = rewrite(graph, host_gemm.fp32_dtypes())
    if count and isinstance(gm_or_graph, torch.fx.GraphModule):
        gm_or_graph.recompile()
    return count
