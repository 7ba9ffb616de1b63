"""The op-support table (TorchNeuron's Y / CPU_FALLBACK / N per op and dtype): every row sourced,
docs/op-support.md in sync with it, get_fallback_ops() reporting from it, and the strict mode
TORCH_NEURONX_STRICT_OPS raising at an op TorchNeuron rejects."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import torch_neuronx
from torch_neuronx import ops_support

ROOT = Path(__file__).resolve().parents[2]


def test_every_row_names_its_source_and_confidence():
    assert ops_support.PAGE_URL.endswith("/torch/reference/api/supported-operators.html")
    assert "2.33" in ops_support.RELEASE
    for row in ops_support.ROWS + list(ops_support.DEFAULTS.values()):
        assert row.status in ops_support.STATUSES
        if row.source == "assumed":
            assert row.confidence == "assumed" and row.note.startswith("Assumption:"), row
        else:
            assert row.source_url.startswith("https://") and row.confidence in ("high", "med", "low"), row
        if row.status == ops_support.N:
            assert row.advice, f"an N row must say what to do: {row}"


@pytest.mark.parametrize("name, dtypes, status, source", [
    ("aten::_grouped_mm", ("bfloat16",), "Y", "native-overview"),
    ("symm_mem::all_to_all_vdev_2d", (), "N", "native-overview"),
    ("quantized::linear", ("qint8",), "N", "supported-operators"),
    ("aten::quantize_per_tensor.default", ("float32", "qint8"), "N", "supported-operators"),
    ("aten::add.Tensor", ("qint8",), "N", "supported-operators"),        # a dtype row is more severe
    ("aten::_to_copy.default", ("float32", "float8_e5m2fnuz"), "N", "EVRF005"),
    ("aten::mul.Tensor", ("complex64",), "CPU_FALLBACK", "EVRF004"),
    ("aten::mul.Tensor", ("float32",), "Y", "assumed"),                   # Core ATen
    ("aten::mul_.Tensor", ("float32",), "Y", "assumed"),                  # its in-place variant
    ("aten::addcmul_.default", ("float32",), "Y", "assumed"),             # decomposed into Core ATen
    ("aten::median.default", ("float32",), "CPU_FALLBACK", "assumed"),    # neither
    ("aten::_foreach_add_.List", ("float32",), "Y", "assumed"),           # not Core ATen; its own row
    ("_c10d_functional::all_reduce", ("float32",), "Y", "native-overview"),
])
def test_classification(name, dtypes, status, source):
    row = ops_support.classify(name, dtypes)
    assert (row.status, row.source) == (status, source)


def test_op_overload_names_are_accepted_as_printed():
    assert ops_support.status("aten.median.default") == ops_support.status("aten::median") == "CPU_FALLBACK"


def test_doc_is_in_sync_with_the_table():
    out = subprocess.run([sys.executable, "-m", "torch_neuronx.ops_support", "--markdown"], cwd=ROOT,
                         capture_output=True, text=True, check=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    doc = (ROOT / "docs" / "op-support.md").read_text()
    assert out.stdout == doc, "docs/op-support.md is stale: python -m torch_neuronx.ops_support --markdown > docs/op-support.md"
    for row in ops_support.ROWS:
        assert all(f"`{op}`" in doc for op in row.ops)
    assert "no per-op row below is copied from it" in doc    # says plainly what could not be read


def test_cli_without_a_choice_says_what_to_ask_for():
    out = subprocess.run([sys.executable, "-m", "torch_neuronx.ops_support"], cwd=ROOT,
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 2 and "--markdown" in out.stderr


def test_get_fallback_ops_reports_the_tables_cpu_fallbacks():
    x = torch.randn(16, device="neuron")
    params = [torch.zeros(4, device="neuron") for _ in range(2)]
    torch_neuronx.clear_op_tracking()
    torch.median(x)                                  # CPU_FALLBACK (assumed default)
    torch._foreach_add_(params, 1.0)                 # outside Core ATen, but the table's row says Y
    x.addcmul_(x, x)                                 # decomposed into Core ATen: Y
    fallback = torch_neuronx.get_fallback_ops()
    executed = torch_neuronx.get_executed_ops()
    assert fallback == {n: c for n, c in executed.items() if ops_support.status(n) == "CPU_FALLBACK"}
    assert fallback["aten::median"] == 1
    assert not [n for n in fallback if "_foreach_add" in n or "addcmul" in n]


def _run(code: str, strict: str | None):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("TORCH_NEURONX_STRICT_OPS", None)
    if strict is not None:
        env["TORCH_NEURONX_STRICT_OPS"] = strict
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, timeout=300)


SCRIPT = """
    import torch
    x = torch.randn(4, device="neuron", requires_grad=True)
    (x * 2).sum().backward()                 # supported ops, forward and backward, run
    print("trained", flush=True)
    q = torch.quantize_per_tensor(x.detach(), 0.1, 0, torch.qint8)
    print("quantized", q.dtype, flush=True)
"""


def test_strict_mode_raises_at_the_op_naming_op_dtype_and_what_to_do():
    off = _run(SCRIPT, None)
    assert off.returncode == 0 and "quantized torch.qint8" in off.stdout   # the virtual core runs it
    on = _run(SCRIPT, "1")
    assert on.returncode == 1 and "trained" in on.stdout and "quantized" not in on.stdout
    last = on.stderr.strip().splitlines()[-1]
    assert last.startswith("torch_neuronx.ops_support.strict.UnsupportedOpError: aten::quantize_per_tensor on float32, qint8")
    assert "status N" in last and "On Trainium the script fails at this op" in last
    assert "What to do: Keep the model in a float dtype" in last and "TORCH_NEURONX_STRICT_OPS=0" in last
    assert ops_support.PAGE_URL in last
    # the traceback points at the user's line
    assert 'line 6, in <module>' in on.stderr


def test_strict_fallback_level_and_compiled_graphs():
    code = """
        import torch
        from torch_neuronx.ops_support.strict import UnsupportedOpError
        x = torch.randn(8, device="neuron")
        f = torch.compile(lambda t: torch.sin(t) * 2, backend="neuron")
        assert torch.allclose(f(x).cpu(), torch.sin(x.cpu()) * 2)
        g = torch.compile(lambda t: t.to(torch.float8_e4m3fnuz) , backend="neuron")
        try:
            g(x)
        except UnsupportedOpError as e:
            print("compiled:", str(e).split(" (")[0])
        try:
            torch.median(x)
        except UnsupportedOpError as e:
            print("eager:", str(e).split(" (")[0])
    """
    one = _run(code, "1")
    assert one.returncode == 0, one.stderr
    assert "compiled: aten::_to_copy on float32, float8_e4m3fnuz is not supported in TorchNeuron" in one.stdout
    assert "eager:" not in one.stdout                       # a CPU fallback is not an error at level 1
    fb = _run(code, "fallback")
    assert "eager: aten::median on float32 runs on the host CPU, not the device, in TorchNeuron" in fb.stdout


def test_strict_mode_bad_value_warns_and_runs_unchecked():
    out = _run(SCRIPT, "yes please")
    assert out.returncode == 0 and "quantized" in out.stdout
    assert "TORCH_NEURONX_STRICT_OPS='yes please' is not a valid setting; use 1" in out.stderr


def test_strict_mode_off_installs_nothing():
    from torch_neuronx.ops_support import strict

    assert os.environ.get("TORCH_NEURONX_STRICT_OPS") is None and not strict.active()
    assert not [m for m in torch.utils._python_dispatch._get_current_dispatch_mode_stack()
                if isinstance(m, strict.StrictOpsMode)]
