"""torch <-> numpy dtype mapping for NKI (bf16/fp8 through ml_dtypes)."""
from __future__ import annotations

import nki.language as nl
import numpy as np
import torch

# The NKI dtypes torch also has, by the name both use (NKI's bool_ is torch.bool); NKI-only
# types (tfloat32, trn2-style float8_e4m3) have no torch equivalent.
_SHARED = ("float32", "float16", "bfloat16", "int8", "int16", "int32", "uint8", "uint16", "uint32",
           "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu")
_PAIRS = [(getattr(torch, name), getattr(nl, name)) for name in _SHARED] + [(torch.bool, nl.bool_)]
_TO_NP = dict(_PAIRS)
_TO_TORCH = {n: t for t, n in _PAIRS}
# dtypes numpy cannot view directly: reinterpret through an integer of the same size
_RAW = {1: (torch.uint8, np.uint8), 2: (torch.int16, np.int16)}
_EXOTIC = {torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e8m0fnu}


def to_numpy_dtype(dtype: torch.dtype) -> np.dtype:
    try:
        return _TO_NP[dtype]
    except KeyError:
        raise ValueError(f"Unsupported dtype: {dtype} has no NKI equivalent (NKI has no 64-bit "
                         f"or complex types; cast to float32/int32 first)") from None


def to_torch_dtype(dtype) -> torch.dtype:
    d = np.dtype(dtype)
    if d.metadata:                      # tfloat32 is float32 storage tagged with metadata
        d = np.dtype(d.str)
    try:
        return _TO_TORCH[d]
    except KeyError:
        raise TypeError(f"NKI dtype {d} has no torch equivalent (e.g. trn2-style float8_e4m3); "
                        f"cast the kernel output to a torch-supported dtype") from None


def numpy_view(t: torch.Tensor) -> np.ndarray:
    """A numpy array over ``t``'s bytes (``t`` on the CPU): no copy, writes reach ``t``."""
    if t.dtype in _EXOTIC:
        tt, _ = _RAW[t.element_size()]
        return t.view(tt).numpy().view(_TO_NP[t.dtype])
    to_numpy_dtype(t.dtype)             # reject unsupported dtypes with NKI's message
    return t.numpy()


def torch_view(a: np.ndarray) -> torch.Tensor:
    """A CPU tensor over ``a``'s bytes (``a`` must be writable); no copy."""
    dt = to_torch_dtype(a.dtype)
    if dt in _EXOTIC:
        _, nt = _RAW[a.dtype.itemsize]
        return torch.from_numpy(a.view(nt)).view(dt)
    return torch.from_numpy(a)
