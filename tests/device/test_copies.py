"""Copies between CPU and neuron and between cores."""
import pytest
import torch


def test_roundtrip_and_between_cores():
    x = torch.randn(4, 5)
    n0 = x.to("neuron")
    n3 = n0.to("neuron:3")
    assert n3.device == torch.device("neuron:3") and n3.data_ptr() != n0.data_ptr()
    assert torch.equal(n3.cpu(), x)
    assert torch.equal(n0.to("neuron:0"), n0) and n0.to("neuron:0") is n0


@pytest.mark.parametrize("src,dst", [(torch.float32, torch.bfloat16), (torch.float32, torch.int64),
                                     (torch.int32, torch.float64), (torch.bool, torch.float16)])
def test_dtype_changing_copies(src, dst):
    x = (torch.randn(16) * 10).to(src)
    assert torch.equal(x.to("neuron", dst).cpu(), x.to(dst))
    assert torch.equal(x.to("neuron").to(dst).cpu(), x.to(dst))
    assert torch.equal(x.to("neuron").to("cpu", dst), x.to(dst))


def test_non_blocking_and_strided():
    x = torch.randn(6, 8)
    n = x.to("neuron", non_blocking=True)
    t = n.t()
    assert torch.equal(t.contiguous().cpu(), x.t().contiguous())
    out = torch.empty(8, 6, device="neuron:1")
    out.copy_(t)  # neuron:0 strided -> neuron:1
    assert torch.equal(out.cpu(), x.t())
    cpu_out = torch.empty(8, 6)
    cpu_out.copy_(t, non_blocking=True)
    assert torch.equal(cpu_out, x.t())
    n[0].copy_(torch.tensor(5.0))  # broadcast from a 0-dim CPU tensor
    assert n[0].cpu().eq(5).all()


def test_overlapping_copy_is_rejected_like_cpu():
    x = torch.arange(10.0, device="neuron")
    with pytest.raises(RuntimeError, match="single memory location"):
        x[1:].copy_(x[:-1])
    assert x.cpu().tolist() == list(map(float, range(10)))
