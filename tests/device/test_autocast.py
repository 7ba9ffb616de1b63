"""torch.autocast("neuron") with CUDA's op policy."""
import pytest
import torch
import torch.nn.functional as F


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_policy(dtype):
    a = torch.randn(4, 4, device="neuron")
    b = torch.randn(4, 4, device="neuron")
    conv_w = torch.randn(2, 3, 3, 3, device="neuron")
    img = torch.randn(1, 3, 8, 8, device="neuron")
    with torch.autocast("neuron", dtype=dtype):
        assert torch.is_autocast_enabled("neuron")
        low = [a @ b, torch.mm(a, b), F.linear(a, b), torch.bmm(a[None], b[None]),
               torch.baddbmm(a[None], a[None], b[None]), F.conv2d(img, conv_w), torch.addmm(a, a, b)]
        assert all(t.dtype == dtype for t in low)
        h = (a @ b)
        fp32 = [torch.softmax(h, -1), F.log_softmax(h, -1), F.layer_norm(h, (4,)),
                F.mse_loss(h, h), F.cross_entropy(h, torch.tensor([0, 1, 2, 3], device="neuron")),
                h.exp(), h.sum()]
        assert all(t.dtype == torch.float32 for t in fp32), [t.dtype for t in fp32]
        assert torch.cat([h, a]).dtype == torch.float32  # promote
    ref = (a.cpu().to(dtype) @ b.cpu().to(dtype))
    with torch.autocast("neuron", dtype=dtype):
        out = a @ b
    assert torch.equal(out.cpu(), ref)


def test_amp_queries():
    assert torch.neuron.get_amp_supported_dtype() == [torch.float32, torch.float16, torch.bfloat16]
    assert torch.neuron.is_bf16_supported()
    with torch.autocast("neuron"):
        assert torch.get_autocast_dtype("neuron") in (torch.bfloat16, torch.float16)


def test_cpu_autocast_unaffected():
    a = torch.randn(2, 2)
    with torch.autocast("neuron", dtype=torch.bfloat16):
        assert (a @ a).dtype == torch.float32
