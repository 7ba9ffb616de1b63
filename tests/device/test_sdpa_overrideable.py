"""SDPA's backend hook `_scaled_dot_product_fused_attention_overrideable` on neuron.

torch_neuronx/kernels/sdpa_overrideable.py implements it and its backward:
equal to the math reference, and to the CPU flash kernel that neuron keeps
choosing by default.
"""
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import profile

hook = torch.ops.aten._scaled_dot_product_fused_attention_overrideable
TOL = dict(rtol=1e-5, atol=1e-5)


def _inputs(shape=(2, 3, 5, 8), kv_len=None, dtype=torch.float32):
    torch.manual_seed(0)
    kv = list(shape)
    kv[-2] = kv_len or shape[-2]
    return torch.randn(shape, dtype=dtype), torch.randn(kv, dtype=dtype), torch.randn(kv, dtype=dtype)


def _leaves(tensors, device):
    return [None if t is None else t.detach().clone().to(device).requires_grad_(t.is_floating_point())
            for t in tensors]


def _math_reference(q, k, v, mask=None, is_causal=False, scale=None):
    q, k, v, mask = _leaves((q, k, v, mask), "cpu")
    with sdpa_kernel(SDPBackend.MATH):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale)
    out.pow(2).sum().backward()
    return [out] + [t.grad for t in (q, k, v, mask) if t is not None and t.requires_grad]


def _hook_on_neuron(q, k, v, mask=None, is_causal=False, scale=None, dropout_p=0.0):
    q, k, v, mask = _leaves((q, k, v, mask), "neuron")
    out = hook(q, k, v, mask, dropout_p, is_causal, scale=scale)[0]
    assert out.device.type == "neuron"
    out.pow(2).sum().backward()
    return [out] + [t.grad for t in (q, k, v, mask) if t is not None and t.requires_grad]


@pytest.mark.parametrize("case", [
    dict(),
    dict(is_causal=True),
    dict(scale=0.3),
    dict(mask=torch.randn(1, 3, 5, 7)),          # broadcast float bias, with its gradient
    dict(mask=torch.rand(5, 7) > 0.3),           # boolean mask
    dict(shape=(3, 5, 8)),                       # unbatched (H, L, E)
], ids=["plain", "causal", "scale", "bias_grad", "bool_mask", "3d"])
def test_hook_matches_math_reference(case):
    case = dict(case)
    q, k, v = _inputs(case.pop("shape", (2, 3, 5, 8)), kv_len=7 if "mask" in case else None)
    if "mask" in case and case["mask"].dtype == torch.bool:
        case["mask"][:, 0] = True  # no fully masked row
    for a, b in zip(_math_reference(q, k, v, **case), _hook_on_neuron(q, k, v, **case), strict=True):
        torch.testing.assert_close(b.cpu(), a, **TOL)


def test_hook_is_bit_identical_to_the_default_neuron_path():
    q, k, v = _inputs()
    default = _leaves((q, k, v), "neuron")
    out = F.scaled_dot_product_attention(*default, is_causal=True)
    out.pow(2).sum().backward()
    via_hook = _hook_on_neuron(q, k, v, is_causal=True)
    for a, b in zip([out] + [t.grad for t in default], via_hook):
        assert torch.equal(a.cpu(), b.cpu())


def test_outputs_follow_the_schema():
    q, k, v = (t.to("neuron") for t in _inputs(kv_len=7))
    out, lse, cum_q, cum_k, max_q, max_k, seed, offset, debug = hook(q, k, v)
    assert out.shape == (2, 3, 5, 8) and lse.shape == (2, 3, 5) and lse.dtype == torch.float32
    assert (max_q, max_k) == (5, 7)
    assert seed.dtype == offset.dtype == torch.int64 and seed.dim() == offset.dim() == 0


def test_dropout_gradient_uses_the_same_mask():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 3, 4, dtype=torch.float64, device="neuron", requires_grad=True)
               for _ in range(3))
    state = torch.neuron.get_rng_state()

    def attention(a, b, c):
        torch.neuron.set_rng_state(state)  # the same keep-mask on every evaluation
        return hook(a, b, c, None, 0.4)[0]

    assert torch.autograd.gradcheck(attention, (q, k, v))
    first = attention(q, k, v)
    assert torch.equal(first, attention(q, k, v))
    assert not torch.equal(first, hook(q, k, v, None, 0.4)[0])  # the generator moved on


def test_sdpa_selects_the_hook_when_only_it_is_enabled():
    q, k, v = _inputs()
    ref = _math_reference(q, k, v, is_causal=True)
    leaves = _leaves((q, k, v), "neuron")
    with sdpa_kernel(SDPBackend.OVERRIDEABLE), profile() as prof:
        out = F.scaled_dot_product_attention(*leaves, is_causal=True)
        out.pow(2).sum().backward()
    names = {e.name for e in prof.events()}
    assert "aten::_scaled_dot_product_fused_attention_overrideable" in names
    assert "aten::_scaled_dot_product_fused_attention_overrideable_backward" in names
    for a, b in zip(ref, [out] + [t.grad for t in leaves]):
        torch.testing.assert_close(b.cpu(), a, **TOL)


def test_default_choice_is_still_the_cpu_flash_kernel():
    q, k, v = (t.to("neuron") for t in _inputs())
    with profile() as prof:
        F.scaled_dot_product_attention(q, k, v)
    names = {e.name for e in prof.events()}
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in names
    assert "aten::_scaled_dot_product_fused_attention_overrideable" not in names


def test_bad_rank_is_rejected():
    x = torch.randn(5, 8, device="neuron")
    with pytest.raises(RuntimeError, match="query must be 3D or 4D, got 2D"):
        hook(x, x, x)
