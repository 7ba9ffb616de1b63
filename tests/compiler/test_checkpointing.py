"""Activation checkpointing inside a compiled graph (TRL's default for SFT):
the recomputed region is wrapped in torch's RNG higher-order ops."""
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def _attention(t, p):
    return F.dropout(F.scaled_dot_product_attention(t, t, t), p)


def _loss(p):
    def f(q):
        return checkpoint(_attention, q, p, use_reentrant=False).square().sum()
    return f


def test_checkpointed_attention_matches_cpu():
    x = torch.randn(1, 2, 16, 8)
    q_cpu, q_comp = x.clone().requires_grad_(), x.neuron().requires_grad_()
    _loss(0.0)(q_cpu).backward()
    torch.compile(_loss(0.0), backend="neuron", dynamic=False)(q_comp).backward()
    assert q_comp.grad.is_neuron
    torch.testing.assert_close(q_comp.grad.cpu(), q_cpu.grad, rtol=1e-5, atol=1e-6)


def test_recomputed_dropout_uses_the_forward_mask():
    """Closed form: for loss = sum(dropout(q)), the forward value is sum(mask * q) / (1 - p) and
    the gradient is mask / (1 - p). The gradient comes from the recomputation, the value from the
    forward: they agree only if the recomputation replayed the forward's random numbers."""
    p = 0.5

    def f(q):
        return checkpoint(lambda t: F.dropout(t, p), q, use_reentrant=False).sum()

    q = (torch.rand(64, 64, generator=torch.Generator().manual_seed(1)) + 1).neuron().requires_grad_()
    torch.manual_seed(3)
    value = torch.compile(f, backend="neuron", dynamic=False)(q)
    value.backward()
    mask = q.grad.cpu() * (1 - p)
    assert set(mask.unique().tolist()) == {0.0, 1.0}            # each element kept or dropped
    assert 0.4 < mask.mean().item() < 0.6                        # about half dropped
    torch.testing.assert_close(value.cpu(), (mask * q.detach().cpu()).sum() / (1 - p), rtol=1e-5, atol=1e-4)


def test_checkpointed_dropout_is_reproducible_under_a_seed():
    compiled = torch.compile(_loss(0.3), backend="neuron", dynamic=False)
    grads = []
    for _ in range(2):
        q = torch.randn(1, 2, 16, 8, generator=torch.Generator().manual_seed(0)).neuron().requires_grad_()
        torch.manual_seed(5)
        compiled(q).backward()
        grads.append(q.grad.cpu())
    assert torch.equal(grads[0], grads[1])
    q = torch.randn(1, 2, 16, 8, generator=torch.Generator().manual_seed(0)).neuron().requires_grad_()
    _loss(0.0)(q).backward()
    assert torch.isfinite(grads[0]).all() and not torch.allclose(grads[0], q.grad.cpu())  # dropout acted


def test_a_checkpointed_graph_runs_under_the_cost_model():
    """The cost model's dispatch mode (and a dry run's) sees the ops a compiled graph's wrapper
    calls, the RNG higher-order op of the recomputed region among them: it has a rule for it
    (without one the program stops there: TRL's SFT with --torch_compile true in a dry run)."""
    import torch_neuronx

    x = torch.randn(1, 2, 16, 8)
    q_cpu, q = x.clone().requires_grad_(), x.neuron().requires_grad_()
    _loss(0.0)(q_cpu).backward()
    compiled = torch.compile(_loss(0.0), backend="neuron", dynamic=False)
    with torch_neuronx.estimate("trn2.3xlarge", 2) as est:
        compiled(q).backward()
    torch.testing.assert_close(q.grad.cpu(), q_cpu.grad, rtol=1e-5, atol=1e-6)
    assert est.events and est.total_s > 0
