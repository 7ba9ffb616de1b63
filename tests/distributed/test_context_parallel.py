"""Context parallelism (`torch.distributed.tensor.experimental.context_parallel`) on neuron.

An attention layer (projections + SDPA + output projection) runs with its input sharded along the
sequence over 2 ranks (the "cp" dim of a 2x2 mesh) and over 4 ranks, for both ring rotate methods
and causal / non-causal attention; its output, the input's gradient and the weights' gradients
equal a single-process CPU run. One spawn of 4 ranks covers both sizes (each rank imports DTensor
once); the same layer under torch.compile(backend="neuron") on 2 ranks equals it too.
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from tests.distributed.dist_harness import run_ranks

B, S, E, HEADS = 1, 8, 8, 2  # S divisible by 2 * ranks (load balancing splits each shard in two)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(E, 3 * E)
        self.out = nn.Linear(E, E)

    def forward(self, x, causal):
        q, k, v = self.qkv(x).view(x.shape[0], x.shape[1], 3, HEADS, E // HEADS).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return self.out(y.transpose(1, 2).reshape(x.shape))


def _reference(layer, x, causal):
    ref = copy.deepcopy(layer)
    xr = x.clone().requires_grad_()
    out = ref(xr, causal)
    out.pow(2).sum().backward()
    return out.detach(), xr.grad, {n: p.grad for n, p in ref.named_parameters()}


def _context_parallel_case(mesh, layer, x, rotate, causal, compiled=False):
    from torch.distributed.tensor.experimental import context_parallel
    from torch.distributed.tensor.experimental._attention import (
        _cp_options,
        context_parallel_unshard,
        set_rotate_method,
    )

    set_rotate_method(rotate)
    _cp_options.enable_load_balance = causal  # torch's ring balances causal masks only
    dev = torch.device("neuron", dist.get_rank())
    model = copy.deepcopy(layer).to(dev)
    run = torch.compile(model, backend="neuron") if compiled else model
    buffer = x.to(dev)
    with context_parallel(mesh, buffers=[buffer], buffer_seq_dims=[1]):
        local = buffer.detach().requires_grad_()
        out = run(local, causal)
        out.pow(2).sum().backward()
    out_full, grad_full = context_parallel_unshard(mesh, [out.detach(), local.grad], [1, 1])
    grads = {}
    for n, p in model.named_parameters():  # each rank holds its tokens' share of the weight gradient
        dist.all_reduce(p.grad, group=mesh.get_group())
        grads[n] = p.grad.cpu()
    return out_full.cpu(), grad_full.cpu(), grads


def _cp_ranks(rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.experimental import context_parallel

    torch.manual_seed(0)
    layer = Attention()
    x = torch.randn(B, S, E)
    two = init_device_mesh("neuron", (2, 2), mesh_dim_names=("dp", "cp"))["cp"]
    four = init_device_mesh("neuron", (world,))
    cases = [(two, rot, causal) for rot in ("allgather", "alltoall") for causal in (False, True)]
    cases += [(four, "allgather", False), (four, "alltoall", True)]
    for mesh, rotate, causal in cases:
        want = _reference(layer, x, causal)
        got = _context_parallel_case(mesh, layer, x, rotate, causal)
        what = (mesh.size(), rotate, causal)
        torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5, msg=lambda m: f"out {what}: {m}")
        torch.testing.assert_close(got[1], want[1], rtol=1e-5, atol=1e-5, msg=lambda m: f"dx {what}: {m}")
        for n in want[2]:
            torch.testing.assert_close(got[2][n], want[2][n], rtol=1e-5, atol=1e-5,
                                       msg=lambda m: f"d{n} {what}: {m}")

    # a mesh on another device than the buffers: a clear error on every rank, before any collective
    cpu_mesh = init_device_mesh("cpu", (world,))
    with pytest.raises(ValueError, match=r"buffers\[0\] is on neuron:\d but the mesh is a 'cpu' mesh"):
        with context_parallel(cpu_mesh, buffers=[x.to("neuron")], buffer_seq_dims=[1]):
            pass
    with pytest.raises(ValueError, match=r"buffers\[0\] is on cpu but the mesh is a 'neuron' mesh"):
        with context_parallel(four, buffers=[x.clone()], buffer_seq_dims=[1]):
            pass


def test_context_parallel_attention_matches_single_device_on_2_and_4_ranks():
    run_ranks(_cp_ranks, 4)



def _cp_compiled_ranks(rank, world):
    import torch._dynamo.utils as dynamo_utils
    from torch.distributed.device_mesh import init_device_mesh

    torch.manual_seed(0)
    layer = Attention()
    x = torch.randn(B, S, E)
    want = _reference(layer, x, True)
    got = _context_parallel_case(init_device_mesh("neuron", (world,)), layer, x, "alltoall", True, compiled=True)
    # the whole forward, ring attention's collectives included, is one compiled graph
    assert not dynamo_utils.counters["graph_break"], dict(dynamo_utils.counters["graph_break"])
    assert dynamo_utils.counters["stats"]["unique_graphs"] == 1
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[1], want[1], rtol=1e-5, atol=1e-5)
    for n in want[2]:
        torch.testing.assert_close(got[2][n], want[2][n], rtol=1e-5, atol=1e-5, msg=lambda m: f"d{n}: {m}")


def test_context_parallel_attention_under_compile_matches_single_device():
    """Causal, load-balanced, all-to-all ring attention inside torch.compile(backend="neuron")."""
    run_ranks(_cp_compiled_ranks, 2, deadline_s=600)   # Inductor compiles forward and backward
