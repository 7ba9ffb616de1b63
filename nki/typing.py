"""nki.typing (nt): parameter annotations.

``nt.tensor[128, 512]`` checks the argument shape (err_annotation_shape_mismatch);
``nt.mutable_tensor`` (optionally with a shape) declares a parameter the kernel may write.
"""
from __future__ import annotations

__all__ = ["tensor", "mutable_tensor", "TensorType"]


class TensorType:
    def __init__(self, shape=None, mutable=False):
        self.shape = None if shape is None else tuple(shape)
        self.mutable = mutable

    def __getitem__(self, shape):
        shape = shape if isinstance(shape, tuple) else (shape,)
        return TensorType(shape, self.mutable)

    def __repr__(self):
        base = "nt.mutable_tensor" if self.mutable else "nt.tensor"
        return base if self.shape is None else f"{base}[{', '.join(map(str, self.shape))}]"


tensor = TensorType()
mutable_tensor = TensorType(mutable=True)
