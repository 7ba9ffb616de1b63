"""Every TorchNeuron and Neuron runtime variable is recognised (torch_neuronx/runtime/_variables.py):
implemented ones act, "no effect" ones get one notice, unknown TORCH_NEURONX_* / NEURON_RT_* names one
warning naming the closest known variable."""
from __future__ import annotations

import logging
import logging.handlers
import os
import re
import tempfile

import pytest

from tests.conftest import run_python
from torch_neuronx.runtime import _log as log, _variables as variables

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
THIS_FILE = os.path.abspath(__file__)
CLEAN = tuple(n for n in os.environ if n.startswith(("TORCH_NEURONX_", "NEURON_")))


def test_typo_warns_with_the_closest_name():
    with pytest.warns(UserWarning, match=r"TORCH_NEURONX_NUMERICZ is not an environment variable torch-neuronx "
                                         r"knows; did you mean TORCH_NEURONX_NUMERICS\?"):
        variables.check({"TORCH_NEURONX_NUMERICZ": "check", "PATH": "/bin"}, force=True)
    with pytest.warns(UserWarning, match="did you mean NEURON_RT_VISIBLE_CORES"):
        variables.check({"NEURON_RT_VISIBLE_CORE": "0"}, force=True)


def test_far_off_name_warns_without_a_guess():
    with pytest.warns(UserWarning) as record:
        variables.check({"TORCH_NEURONX_ZZZZZZZZZZZZZZZZZZZZZZ": "1"}, force=True)
    assert len(record) == 1 and "did you mean" not in str(record[0].message)


def test_known_and_foreign_names_are_quiet(recwarn, caplog):
    with caplog.at_level(logging.WARNING, logger="torch_neuronx.runtime"):
        variables.check({"TORCH_NEURONX_NUMERICS": "host", "NEURON_RT_VISIBLE_CORES": "0-1",
                         "NEURON_SOMETHING_ELSE": "1", "CUDA_VISIBLE_DEVICES": "0"}, force=True)
    assert not recwarn.list and not caplog.records


def test_no_effect_variable_gets_one_notice(caplog):
    with caplog.at_level(logging.WARNING, logger="torch_neuronx.runtime"):
        variables.check({"NEURON_CC_FLAGS": "--model-type=transformer",
                         "TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY": "1"}, force=True)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert any(m.startswith("NEURON_CC_FLAGS is a Trainium setting with no effect") for m in messages)


def test_table_has_one_row_per_name_and_a_kind():
    names = [v.name for v in variables.VARIABLES]
    assert len(names) == len(set(names))
    assert {v.kind for v in variables.VARIABLES} == {variables.IMPLEMENTED, variables.NO_EFFECT, variables.INTERNAL}
    for name in ("TORCH_NEURONX_HOST_LOW_PRECISION_GEMM", "TORCH_NEURONX_STRICT_OPS", "NEURON_RT_LOG_LEVEL",
                 "NEURON_RT_LOG_LOCATION", "TORCH_NEURONX_COMPLEX_DECOMPOSE", "NEURON_CC_FLAGS",
                 "TORCH_NEURONX_DEBUG_DIR", "TORCH_NEURONX_DEFAULT_COMPILE_BACKEND"):
        assert name in variables.BY_NAME


def _names_in_sources() -> set[str]:
    found: set[str] = set()
    pattern = re.compile(r"\b(?:TORCH_NEURONX_[A-Z0-9_]*[A-Z0-9]|NEURON_RT_[A-Z0-9_]*[A-Z0-9])\b")
    for top in ("torch_neuronx", "nki", "neuron_hardware", "csrc", "tests", "examples", "benchmarks", ".ci"):
        for folder, _, files in os.walk(os.path.join(REPO, top)):
            for f in files:
                path = os.path.join(folder, f)
                script = "." not in f  # .ci/run and friends
                source = script or f.endswith((".py", ".cpp", ".h", ".sh"))
                if path == THIS_FILE or "__pycache__" in folder or not source:
                    continue
                try:
                    with open(path, encoding="utf-8") as fh:
                        found |= set(pattern.findall(fh.read()))
                except (UnicodeDecodeError, OSError):
                    continue
    return found


def test_every_variable_the_product_reads_is_in_the_table():
    """No real variable may be called unknown: every name in the code, tests and CI is a row."""
    missing = sorted(n for n in _names_in_sources() if n not in variables.BY_NAME)
    assert missing == [], missing


def test_check_runs_at_start_once():
    result = run_python("""
        import torch
        torch.ones(1, device="neuron")
        from torch_neuronx.runtime import _variables as variables
        variables.check()  # a second call in the same process says nothing
        print("OK")
    """, env={"TORCH_NEURONX_NUMERICZ": "check", "NEURON_CC_FLAGS": "-O1"}, unset=CLEAN)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr.count("did you mean TORCH_NEURONX_NUMERICS?") == 1, result.stderr
    assert result.stderr.count("NEURON_CC_FLAGS is a Trainium setting with no effect") == 1, result.stderr


def test_runtime_log_level_info_shows_the_start_line_and_error_hides_notices():
    info = run_python("import torch; torch.ones(1, device='neuron')", env={"NEURON_RT_LOG_LEVEL": "INFO"},
                      unset=CLEAN)
    assert info.returncode == 0, info.stderr[-2000:]
    assert re.search(r"INFO torch_neuronx.runtime: virtual NeuronCore runtime: trn2\S* \(trn2\), LNC=2, 4 of "
                     r"\d+ logical cores visible, 24 GiB HBM per core", info.stderr), info.stderr
    quiet = run_python("import torch; torch.ones(1, device='neuron')",
                       env={"NEURON_RT_LOG_LEVEL": "ERROR", "NEURON_CC_FLAGS": "-O1"}, unset=CLEAN)
    assert quiet.returncode == 0 and "NEURON_CC_FLAGS" not in quiet.stderr, quiet.stderr


def test_bad_log_level_names_the_variable_on_first_use():
    result = run_python("import torch; torch.ones(1, device='neuron')", env={"NEURON_RT_LOG_LEVEL": "LOUD"},
                        unset=CLEAN)
    assert result.returncode != 0
    assert "NEURON_RT_LOG_LEVEL='LOUD' is not a log level" in result.stderr


def test_log_location(monkeypatch):
    logger = logging.getLogger(log.RUNTIME_LOGGER)
    try:
        monkeypatch.setenv(log.LOG_LEVEL, "DEBUG")
        monkeypatch.setenv(log.LOG_LOCATION, "syslog")
        log.configure()
        mine = [h for h in logger.handlers if getattr(h, log._MARK, False)]
        assert len(mine) == 1 and logger.level == logging.DEBUG and not logger.propagate
        expected = logging.handlers.SysLogHandler if os.path.exists("/dev/log") else logging.StreamHandler
        assert isinstance(mine[0], expected)
        monkeypatch.setenv(log.LOG_LOCATION, "printer")
        with pytest.raises(Exception, match="NEURON_RT_LOG_LOCATION='printer' is not a log location"):
            log.configure()
    finally:
        monkeypatch.delenv(log.LOG_LEVEL)
        monkeypatch.delenv(log.LOG_LOCATION)
        log.configure()
    assert not [h for h in logger.handlers if getattr(h, log._MARK, False)] and logger.propagate


def test_package_log_file_gets_the_compile_notice(tmp_path):
    path = tmp_path / "neuron.log"
    result = run_python("""
        import torch
        torch.compile(lambda x: x * 2)(torch.ones(3, device="neuron"))
    """, env={"TORCH_NEURONX_LOG_LEVEL": "2", "TORCH_NEURONX_LOG_FILE": str(path)}, unset=CLEAN)
    assert result.returncode == 0, result.stderr[-2000:]
    text = path.read_text()
    assert "INFO torch_neuronx.compiler: torch.compile without backend= got neuron inputs" in text, text
    assert "torch_neuronx.runtime: virtual NeuronCore runtime" in text


def test_debug_dir_default_is_torchneurons():
    from torch_neuronx.compiler import _options as options

    if "TORCH_NEURONX_DEBUG_DIR" in os.environ:
        pytest.skip("TORCH_NEURONX_DEBUG_DIR is set in this environment")
    assert options.debug_dir() == os.path.join(tempfile.gettempdir(), "neuron_backend")


def test_docs_list_every_variable_with_its_kind():
    with open(os.path.join(REPO, "docs", "environment-variables.md")) as f:
        doc = f.read()
    sections = re.split(r"^## ", doc, flags=re.M)
    titles = {variables.IMPLEMENTED: "Implemented", variables.NO_EFFECT: "Accepted, no effect here",
              variables.INTERNAL: "Internal"}
    for var in variables.VARIABLES:
        section = next(s for s in sections if s.startswith(titles[var.kind]))
        assert f"| `{var.name}` |" in section, var.name
