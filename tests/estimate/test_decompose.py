"""No op is free by accident: fused ops without a FLOP formula are costed from their decomposition
(PyTorch's inference fast path for nn.TransformerEncoderLayer and nn.MultiheadAttention, and any
op with a decomposition), and what still has no model is listed or, under strict mode, an error."""
import warnings

import pytest
import torch
import torch.nn as nn

import torch_neuronx
from torch_neuronx.estimate import UnmodelledOpError, hardware, op_estimate

aten = torch.ops.aten
B, T, E, H, FF = 4, 128, 512, 8, 2048


def _analytic_encoder_flops(b, t, e, ff):
    """Projections (QKV in, out), the FFN's two matmuls, attention's QK^T and AV, 2 FLOPs per MAC."""
    tokens = b * t
    return 2 * tokens * e * 3 * e + 2 * tokens * e * e + 2 * 2 * tokens * e * ff + 2 * 2 * b * t * t * e


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_fast_path_is_costed_from_its_parts(norm_first):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(E, H, FF, batch_first=True, norm_first=norm_first).to("neuron").eval()
    x = torch.randn(B, T, E, device="neuron")
    with torch.no_grad():
        ref = layer(x).cpu()
        with warnings.catch_warnings():
            warnings.simplefilter("error")   # costed, so no "no cost model" warning
            with torch_neuronx.estimate("trn2.3xlarge", strict=True) as est:
                y = layer(x)
    assert torch.equal(y.cpu(), ref)         # estimating changes nothing
    ops = est.by_op()
    assert list(ops) == ["aten._transformer_encoder_layer_fwd"]   # the fast path ran, one op
    flops = ops["aten._transformer_encoder_layer_fwd"]["flops"]
    assert flops == pytest.approx(_analytic_encoder_flops(B, T, E, FF), rel=0.03)
    assert not est.unmodelled and "no cost model" not in est.summary()
    (ev,) = est.events
    hw = est.hardware
    # never faster than its FLOPs at the fp32 TensorEngine peak, nor its weights' bytes at HBM peak
    weight_bytes = 4 * (4 * E * E + 2 * E * FF)
    assert ev.seconds - ev.launch_s > flops / hw.tensor_flops("float32")
    assert ev.seconds - ev.launch_s > weight_bytes / hw.hbm_bytes_per_s
    assert ev.category == "matmul" and ev.bound == "compute"


def test_multi_head_attention_fast_path_counts_its_projections_and_attention():
    mha = nn.MultiheadAttention(E, H, batch_first=True).to("neuron").eval()
    x = torch.randn(2, 64, E, device="neuron")
    with torch.no_grad(), torch_neuronx.estimate(strict=True) as est:
        mha(x, x, x, need_weights=False)
    (name,) = est.by_op()
    assert name == "aten._native_multi_head_attention"
    tokens = 2 * 64
    expected = 2 * tokens * E * 4 * E + 2 * 2 * 2 * 64 * 64 * E
    assert est.flops == pytest.approx(expected, rel=0.03)


def test_op_with_a_torch_decomposition_counts_its_matmul():
    """_addmm_activation (addmm + gelu in one call) has no formula but a PyTorch decomposition."""
    a = torch.empty(256, 512, device="meta")
    w = torch.empty(512, 1024, device="meta")
    bias = torch.empty(1024, device="meta")
    out = aten._addmm_activation(bias, a, w, use_gelu=True)
    e = op_estimate(aten._addmm_activation.default, (bias, a, w), {"use_gelu": True}, out,
                    hardware=hardware(), launch_s=0.0)
    assert e.modelled and e.flops == 2 * 256 * 512 * 1024 and e.engine == "tensor"
    mm = op_estimate(aten.addmm.default, (bias, a, w), {}, out, hardware=hardware(), launch_s=0.0)
    assert e.seconds > mm.seconds                 # the matmul and its activation


def test_unmodelled_op_raises_under_strict_and_env(monkeypatch):
    from torch_neuronx.estimate import _formulas as formulas

    monkeypatch.setattr(formulas, "_warned", set())   # other tests see the op's first warning
    x = torch.randn(8, 4, device="neuron")   # _pdist_forward: a Core ATen op (on the device) with no model
    with pytest.raises(UnmodelledOpError, match=r"no cost model for aten\._pdist_forward.*register_cost"):
        with torch_neuronx.estimate(strict=True):
            torch.ops.aten._pdist_forward(x, 2.0)
    monkeypatch.setenv("TORCH_NEURONX_ESTIMATE_STRICT", "1")
    with pytest.raises(UnmodelledOpError):
        with torch_neuronx.estimate():
            torch.ops.aten._pdist_forward(x, 2.0)
    monkeypatch.setenv("TORCH_NEURONX_ESTIMATE_STRICT", "maybe")
    with pytest.raises(RuntimeError, match="TORCH_NEURONX_ESTIMATE_STRICT='maybe' is not a switch"):
        torch_neuronx.estimate()
    monkeypatch.setenv("TORCH_NEURONX_ESTIMATE_STRICT", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch_neuronx.estimate() as est:   # not strict: listed in the report
            torch.ops.aten._pdist_forward(x, 2.0)
    assert "aten._pdist_forward" in est.unmodelled and "aten._pdist_forward" in est.to_json()


def test_compiled_graph_lists_its_unmodelled_ops(monkeypatch):
    from torch_neuronx.estimate import _formulas as formulas
    from torch_neuronx.estimate._graphs import estimate_graph

    monkeypatch.setattr(formulas, "_warned", set())
    gm = torch.fx.symbolic_trace(lambda x: torch.histc(x, bins=4) + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = estimate_graph(gm, [torch.randn(64)], hardware(), "h", backward=False)["forward"]
    assert g.unmodelled == ("aten.histc",)
    est = torch_neuronx.estimate(strict=True)
    with pytest.raises(UnmodelledOpError, match="aten.histc"):
        est.record_graph(g, 0)
