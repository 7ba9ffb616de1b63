"""Hugging Face `kernels` (0.17) loads our NKI kernel repository offline: build/torch-neuron/
is chosen over torch-universal, and kernelize(model, device="neuron") swaps an RMSNorm."""
import copy
import sys
from pathlib import Path

import torch
from torch import nn

import kernels
from tests.nki_torch.conftest import neuron
from kernels import LocalLayerRepository, Mode, kernelize, use_kernel_mapping

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
# The example's LlamaRMSNorm (decorated for the Hub layer "RMSNorm") and its kernel repository.
from nki_rmsnorm_hub import REPO, RMSNorm  # noqa: E402


class Net(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.norm = RMSNorm(d)

    def forward(self, x):
        return self.norm(self.lin(x))


def _mapping():
    return {"RMSNorm": {"neuron": LocalLayerRepository(repo_path=REPO, layer_name="RMSNorm")}}


def test_neuron_backend_detected():
    from kernels.backends import _backend
    assert _backend().variant_str == "neuron"      # torch.neuron exists


def test_get_local_kernel_prefers_torch_neuron():
    k = kernels.get_local_kernel(REPO)
    assert k.BACKEND == "neuron" and k.__name__ == "_nki_rmsnorm_neuron_7c1e2a"
    assert Path(k.__file__).parent.parent.name == "torch-neuron"
    u = kernels.get_local_kernel(REPO, backend="cpu")
    assert u.BACKEND == "universal"
    x, w = neuron(3, 70, 64), neuron(64, seed=1)
    y = k.rms_norm(x, w, 1e-6)
    assert y.device == x.device
    torch.testing.assert_close(y.cpu(), u.rms_norm(x.cpu(), w.cpu(), 1e-6), rtol=1e-5, atol=1e-5)
    xb, wb = x.bfloat16(), w.bfloat16()
    torch.testing.assert_close(k.rms_norm(xb, wb, 1e-6).cpu(), u.rms_norm(xb.cpu(), wb.cpu(), 1e-6),
                               rtol=1.6e-2, atol=1e-2)


def test_local_kernels_env_resolves_a_hub_repo_id(monkeypatch):
    monkeypatch.setenv("LOCAL_KERNELS", f"torch-neuronx/nki-rmsnorm={REPO}")
    k = kernels.get_kernel("torch-neuronx/nki-rmsnorm", version=1)
    assert k.BACKEND == "neuron"


def test_kernelize_swaps_rmsnorm_same_outputs_and_grads():
    torch.manual_seed(0)
    model = Net().to("neuron")
    model.norm.weight.data.normal_()
    ref_model = copy.deepcopy(model)
    x = neuron(2, 150, 64)                        # 300 rows: two full tiles + a ragged one
    with use_kernel_mapping(_mapping()):
        kernelize(model, mode=Mode.TRAINING)      # device inferred from the parameters
    assert model.norm.forward.__func__.__module__ == "_nki_rmsnorm_neuron_7c1e2a.layers"
    out, ref = model(x), ref_model(x)
    torch.testing.assert_close(out.cpu(), ref.cpu(), rtol=1e-5, atol=1e-5)
    out.sum().backward()
    ref.sum().backward()
    for p, q in zip(model.parameters(), ref_model.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad.cpu(), rtol=1e-4, atol=1e-5)


def test_kernelize_for_torch_compile():
    torch._dynamo.reset()
    model = Net().to("neuron")
    ref_model = copy.deepcopy(model)
    with use_kernel_mapping(_mapping()):
        kernelize(model, device="neuron", mode=Mode.INFERENCE | Mode.TORCH_COMPILE)
    x = neuron(4, 64)
    out = torch.compile(model, backend="aot_eager", fullgraph=True)(x)
    torch.testing.assert_close(out.cpu(), ref_model(x).cpu(), rtol=1e-5, atol=1e-5)
    torch._dynamo.reset()


def test_example_script(python_subprocess):
    script = ROOT / "examples" / "nki_rmsnorm_hub.py"
    r = python_subprocess(f"import runpy; runpy.run_path({str(script)!r}, run_name='__main__')",
                          env={"HF_HUB_OFFLINE": "1"}, unset=("LOCAL_KERNELS",), cwd=str(ROOT))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "get_local_kernel -> _nki_rmsnorm_neuron_7c1e2a (backend neuron)" in r.stdout
    assert "with backend='cpu' -> universal" in r.stdout
