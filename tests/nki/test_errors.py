"""The error class: one type, stable codes, messages that name instruction, operand, fix, place."""
import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl
from nki.errors import CODES


def test_codes_are_wellformed():
    for code, (from_nki, desc, hint) in CODES.items():
        assert code.startswith("err_") and desc and hint
    for code in ("err_num_partition_exceed_arch_limit", "err_unsupported_memory",
                 "err_tensor_access_out_of_bound", "err_cannot_update_immutable_parameter",
                 "err_shared_hbm_must_in_kernel_level", "err_activation_bias_invalid_type"):
        assert CODES[code][0] is True


def test_unknown_code_rejected():
    with pytest.raises(ValueError):
        nki.NkiValidationError("err_made_up", "x")


def test_message_names_instruction_operand_limit_location():
    def k(a):
        t = nl.ndarray((128, 1024), nl.float32, buffer=nl.sbuf)
        ps = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, t[:, 0:128], t)                      # moving N=1024 > 512
        return a
    with pytest.raises(nki.NkiValidationError) as ei:
        nki.simulate(k)(np.zeros((2, 2), np.float32))
    e = ei.value
    assert isinstance(e, AssertionError)
    assert e.code == "err_size_of_dimension_exceed_arch_limit"
    assert e.instruction == "nisa.nc_matmul" and e.operand == "moving"
    msg = str(e)
    assert "512" in msg and "nisa.nc_matmul" in msg and "Fix:" in msg
    assert "test_errors.py" in e.location


def test_python_errors_keep_kernel_traceback():
    def k(a):
        raise KeyError("inside the kernel")
    with pytest.raises(KeyError) as ei:
        nki.simulate(k)(np.zeros((2, 2), np.float32))
    assert any(tb.name == "k" for tb in ei.traceback)
