"""torch.accelerator.get_device_capability for neuron (csrc/guard.cpp).

The capability lists the dtypes the device holds and computes: the virtual
NeuronCore runs every dtype the host kernels do, except the quantized ones,
which have no neuron kernels, and the 1-7 bit integer placeholders, which
have kernels on no device.
"""
import pytest
import torch

QUANTIZED = {torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4}
SUB_BYTE = {getattr(torch, f"{p}int{n}") for p in ("", "u") for n in range(1, 8)}  # no kernels anywhere


def test_capability_dict():
    caps = torch.accelerator.get_device_capability("neuron:0")
    dtypes = set(caps["supported_dtypes"])
    assert {torch.float32, torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e5m2,
            torch.float64, torch.int64, torch.int8, torch.uint8, torch.bool, torch.complex64} <= dtypes
    assert not dtypes & (QUANTIZED | SUB_BYTE)
    assert caps == torch.accelerator.get_device_capability(torch.device("neuron", 1))


def test_capability_agrees_with_the_device():
    """Every dtype listed is created, copied and computed with on the device; the rest are refused."""
    caps = set(torch.accelerator.get_device_capability("neuron:0")["supported_dtypes"])
    for dtype in caps:
        t = torch.zeros(3, dtype=dtype).to("neuron")
        assert t.dtype == dtype and t.device.type == "neuron"
        assert torch.equal(t.cpu().view(torch.uint8), torch.zeros(3, dtype=dtype).view(torch.uint8))
    for dtype in QUANTIZED:  # the error CUDA gives for QuantizedCUDA
        with pytest.raises(NotImplementedError, match="'Quantizedneuron' backend"):
            torch.empty(2, dtype=dtype, device="neuron")


def test_capability_defaults_to_the_current_device():
    torch.neuron.set_device(3)
    assert torch.accelerator.get_device_capability() == torch.accelerator.get_device_capability(3)
    props = torch.neuron.get_device_properties()
    assert torch.neuron.get_device_capability() == (props.major, props.minor)


def test_capability_of_a_core_that_does_not_exist():
    count = torch.neuron.device_count()
    with pytest.raises(RuntimeError, match=f"invalid device ordinal: neuron:{count}"):
        torch.accelerator.get_device_capability(f"neuron:{count}")
    with pytest.raises(ValueError, match="doesn't match the current accelerator"):
        torch.accelerator.get_device_capability("cpu")


def test_autocast_to_an_unsupported_dtype_warns_like_cuda():
    with pytest.warns(UserWarning, match="In neuron autocast, but the target dtype is not supported"):
        with torch.autocast("neuron", dtype=torch.float64):
            pass
