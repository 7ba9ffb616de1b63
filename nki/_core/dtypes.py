"""NKI dtypes as numpy dtypes (bf16 and fp8 via ml_dtypes).

``tfloat32`` is float32 storage tagged with metadata; values written to a tf32
tensor are rounded to a 10-bit mantissa. There are no 64-bit types.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

bool_ = np.dtype(np.bool_)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
uint8 = np.dtype(np.uint8)
uint16 = np.dtype(np.uint16)
uint32 = np.dtype(np.uint32)
float16 = np.dtype(np.float16)
float32 = np.dtype(np.float32)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
tfloat32 = np.dtype(np.float32, metadata={"nki": "tfloat32"})
float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3)      # trn2-style e4m3 (max 240)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)  # OCP e4m3 (max 448), trn3
float8_e8m0fnu = np.dtype(ml_dtypes.float8_e8m0fnu)

ALL = (bool_, int8, int16, int32, uint8, uint16, uint32, float16, float32, bfloat16,
       float8_e4m3, float8_e5m2, float8_e4m3fn, float8_e8m0fnu)
_LOW_PRECISION = {bfloat16, float8_e4m3, float8_e5m2, float8_e4m3fn, float8_e8m0fnu}
_FP8 = {float8_e4m3, float8_e5m2, float8_e4m3fn, float8_e8m0fnu}
_NAMES = {float8_e4m3: "float8_e4m3", float8_e5m2: "float8_e5m2",
          float8_e4m3fn: "float8_e4m3fn", float8_e8m0fnu: "float8_e8m0fnu", bfloat16: "bfloat16"}


def is_tf32(dt) -> bool:
    dt = np.dtype(dt)
    return bool(dt.metadata) and dt.metadata.get("nki") == "tfloat32"


def name_of(dt) -> str:
    dt = np.dtype(dt)
    if is_tf32(dt):
        return "tfloat32"
    return _NAMES.get(dt, dt.name)


def is_float(dt) -> bool:
    dt = np.dtype(dt)
    return dt.kind == "f" or dt in _LOW_PRECISION


def is_int(dt) -> bool:
    return np.dtype(dt).kind in "iu"


def is_fp8(dt) -> bool:
    return np.dtype(dt) in _FP8


def is_fp32(dt) -> bool:
    return np.dtype(dt) == float32  # tfloat32 compares equal too


def canonical(dt, *, what: str = "dtype") -> np.dtype:
    """Validate and normalise a user dtype; 64-bit types raise ValueError."""
    if isinstance(dt, str):
        dt = {"bfloat16": bfloat16, "tfloat32": tfloat32, "float8_e4m3": float8_e4m3,
              "float8_e5m2": float8_e5m2, "float8_e4m3fn": float8_e4m3fn}.get(dt, dt)
    try:
        d = np.dtype(dt)
    except TypeError:
        raise ValueError(f"Unsupported dtype: {dt!r}") from None
    if d not in ALL and not is_tf32(d):
        raise ValueError(f"Unsupported dtype: {name_of(d)} ({what}); NKI has no 64-bit or "
                         f"complex types, cast to float32/int32 first")
    return d


def storage_dtype(dt, precise: bool) -> np.dtype:
    """The numpy dtype used to hold data of NKI dtype ``dt``."""
    d = np.dtype(dt)
    if is_tf32(d):
        return float32
    if not precise and d in _LOW_PRECISION:
        return float32
    return d


def round_tf32(x: np.ndarray) -> np.ndarray:
    """Round float32 values to tf32 (10-bit mantissa), nearest-even."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    lsb = (b >> 13) & 1
    b = (b + 0x0FFF + lsb) & np.uint32(0xFFFFE000)
    return b.view(np.float32)


def promote(*dts) -> np.dtype:
    """Result dtype of an element-wise op over tiles with dtypes ``dts``."""
    dts = [np.dtype(d) for d in dts if d is not None]
    if not dts:
        return float32
    floats = [d for d in dts if is_float(d)]
    if not floats:
        r = np.result_type(*dts)
        return r if r.itemsize <= 4 else int32
    if all(d == floats[0] for d in floats) and len(floats) == len(dts):
        return floats[0]
    if len(floats) == 1 and len(floats) != len(dts):
        return floats[0]
    return float32
