"""A weightless checkpoint for a dry run: a real safetensors file whose tensor bytes are a hole.

Some loaders have no config-only route: diffusers' `from_pretrained(..., parallel_config=
TensorParallelConfig(...))` shards *while reading the file* (each rank reads only its slices), so
the code path a plan should exercise needs a weights file. `write(module, path)` writes one with
the header of `module.state_dict()` (names, shapes, dtypes: build the module on the meta device)
and a data section that is only a sparse-file hole: nothing is written, the file takes no disk
space and every weight reads as zero. The loader then runs unchanged; in a dry run the copies of
the weights to neuron skip their data, as any host-to-device copy of a large tensor does.

The format is safetensors' own: an 8-byte little-endian header length, the JSON header (padded
with spaces to a multiple of 8), then the tensors' bytes at the header's offsets.
"""
from __future__ import annotations

import json
import os
import struct

import torch

# safetensors' dtype names
_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
           torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
           torch.bool: "BOOL"}


def header(tensors: dict[str, torch.Tensor], dtype: torch.dtype | None = None) -> tuple[dict, int]:
    """(safetensors header, bytes of the data section). Floating tensors take `dtype` when given."""
    out: dict = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, t in tensors.items():
        dt = dtype if dtype is not None and t.is_floating_point() else t.dtype
        if dt not in _DTYPES:
            raise ValueError(f"zero_checkpoint: tensor {name!r} has dtype {dt}, which safetensors cannot store; "
                             f"use one of {sorted(str(d) for d in _DTYPES)}")
        n = t.numel() * dt.itemsize
        out[name] = {"dtype": _DTYPES[dt], "shape": list(t.shape), "data_offsets": [offset, offset + n]}
        offset += n
    return out, offset


def write(module_or_state: torch.nn.Module | dict, path: str, dtype: torch.dtype | None = None) -> int:
    """Write the weightless checkpoint of a module (or a state dict of tensors, meta ones included)
    to `path`; returns the file's apparent size in bytes (its disk usage is the header's)."""
    state = module_or_state.state_dict() if isinstance(module_or_state, torch.nn.Module) else module_or_state
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise TypeError("zero_checkpoint.write: pass an nn.Module or a dict of name -> tensor")
    head, data_bytes = header(state, dtype)
    blob = json.dumps(head, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    tmp = path + ".partial"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        f.truncate(8 + len(blob) + data_bytes)   # the hole: no bytes written, none stored
    os.replace(tmp, path)
    return 8 + len(blob) + data_bytes
