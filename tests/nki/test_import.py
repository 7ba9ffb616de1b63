"""`import nki` never imports torch, and exposes the dialect's modules."""
import subprocess
import sys

from tests.nki.conftest import ROOT


def _run(code):
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_import_is_torch_and_numpy_free():
    """What keeps `import nki` cheap; its time is measured in benchmarks/nki_import_time.py."""
    out = _run("import sys, nki; print('torch' in sys.modules, 'numpy' in sys.modules)")
    assert out == "False False"


def test_language_and_isa_do_not_import_torch():
    out = _run("import sys, nki, nki.language as nl, nki.isa as nisa, nki.typing as nt; "
               "print('torch' in sys.modules, nki.language is nl, nki.isa is nisa)")
    assert out == "False True True"


def test_public_names():
    import nki
    import nki.isa as nisa
    import nki.language as nl
    for name in ("jit", "simulate", "last_run", "NkiValidationError", "Kernel"):
        assert hasattr(nki, name)
    for name in ("ndarray", "zeros", "load", "store", "matmul", "transpose", "softmax", "rms_norm",
                 "where", "program_id", "num_programs", "tile_size", "sbuf", "psum", "hbm",
                 "shared_hbm", "bfloat16", "float8_e4m3", "exp", "add", "sum", "max"):
        assert hasattr(nl, name), name
    for name in ("dma_copy", "tensor_copy", "memset", "nc_matmul", "nc_transpose", "tensor_tensor",
                 "tensor_scalar", "tensor_reduce", "activation", "reciprocal", "iota",
                 "affine_select", "bn_stats", "bn_aggr", "engine", "reduce_cmd",
                 "NkiValidationError"):
        assert hasattr(nisa, name), name
    assert nisa.NkiValidationError is nki.NkiValidationError
