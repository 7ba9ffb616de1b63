"""nki.language (nl): tensors, buffers, creation, movement, element-wise maths,
reductions, matmul/transpose, composites and SPMD helpers."""
from .._core.buffers import (Buffer, hbm, is_hbm, is_on_chip, is_psum, is_sbuf, private_hbm, psum, sbuf,
                      shared_hbm)
from .composites import broadcast_to, dropout, expand_dims, rms_norm, softmax, where
from .control import (affine_range, device_print, dynamic_range, fori_loop, no_reorder,
                      num_programs, program_id, program_ndim, sequential_range, static_range)
from .creation import (empty_like, full, full_like, ndarray, ones, ones_like, rand, random_seed,
                       shared_constant, shared_identity_matrix, zeros, zeros_like)
from .._core.dtypes import (bfloat16, bool_, float8_e4m3, float8_e4m3fn, float8_e5m2, float8_e8m0fnu,
                     float16, float32, int8, int16, int32, tfloat32, uint8, uint16, uint32)
from .math import (abs, abs_max, abs_min, add, arctan, bitwise_and, bitwise_not, bitwise_or,
                   bitwise_xor, ceil, copy, cos, divide, equal, erf, erf_dx, exp, floor, fmod,
                   gelu, gelu_apprx_sigmoid, gelu_apprx_tanh, gelu_dx, greater, greater_equal,
                   identity, invert, left_shift, less, less_equal, log, logical_and, logical_not,
                   logical_or, logical_xor, maximum, minimum, mish, mod, multiply, negative,
                   not_equal, power, reciprocal, relu, right_shift, rsqrt, sigmoid, sign, silu,
                   silu_dx, sin, softplus, sqrt, square, subtract, tan, tanh, trunc)
from .matmul import matmul, transpose
from .movement import load, load_transpose2d, store
from .reductions import all, max, mean, min, prod, sum, var
from .._core.tensor import NkiTensor, ds
from .tile_size import tile_size

tensor = NkiTensor
# ruff: noqa: F401  (re-exports)

# Every NKI name imported above (not the submodules that define them).
__all__ = sorted(name for name, value in globals().items()
                 if not name.startswith("_") and name != "annotations" and type(value).__name__ != "module")
