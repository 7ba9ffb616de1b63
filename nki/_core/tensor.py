"""NkiTensor: a strided view (offset, shape, strides in elements) over one storage.

Views (slicing, reshape, permute, broadcast, ap, view(dtype)) share storage and
cost nothing. On-chip (SBUF/PSUM) tensors are at least 2-D and dimension 0 is
the partition dimension, which views may not stride or reorder.
"""
from __future__ import annotations

import operator

import numpy as np

from ..errors import raise_error
from . import dtypes as dt
from . import ops

_as_strided = np.lib.stride_tricks.as_strided

__all__ = ["NkiTensor", "ds", "np_view"]


def ds(start, size):
    """Dynamic-slice helper: ``t[nl.ds(i*128, 128)]`` is ``t[i*128:i*128+128]``."""
    return slice(start, start + size)


def _c_strides(shape):
    st, acc = [], 1
    for n in reversed(shape):
        st.append(acc)
        acc *= n
    return tuple(reversed(st))


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


class NkiTensor:
    """A tensor in hbm, shared_hbm, sbuf or psum (see ``.buffer``)."""

    __slots__ = ("_st", "offset", "shape", "strides", "dtype", "name")
    __array_priority__ = 1000

    def __init__(self, st, offset, shape, strides, dtype=None, name=None):
        self._st = st
        self.offset = int(offset)
        self.shape = tuple(int(s) for s in shape)
        self.strides = tuple(int(s) for s in strides)
        self.dtype = st.dtype if dtype is None else np.dtype(dtype)
        self.name = st.name if name is None else name

    # ------------------------------------------------------------------ basics
    @property
    def buffer(self):
        return self._st.buffer

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    def __len__(self):
        return self.shape[0]

    def __iter__(self):
        raise TypeError("NKI tensors are not iterable; loop over range(t.shape[0]) and slice")

    def __bool__(self):
        raise TypeError("the truth value of an NKI tensor is not known at trace time; "
                        "use nl.where / nisa.affine_select for data-dependent selection")

    def __repr__(self):
        return (f"NkiTensor({self.name or '?'}, shape={list(self.shape)}, "
                f"dtype={dt.name_of(self.dtype)}, buffer={self.buffer!r})")

    def __array__(self, dtype=None, copy=None):
        a = np.array(np_view(self))
        return a.astype(dtype) if dtype is not None else a

    def is_contiguous(self) -> bool:
        return self.strides == _c_strides(self.shape) or self.size <= 1

    def get_pattern(self):
        """Access pattern ``[[stride, count], ...]`` (elements), partition entry first."""
        return [[s, n] for s, n in zip(self.strides, self.shape)]

    def _view(self, offset, shape, strides, dtype=None):
        return NkiTensor(self._st, offset, shape, strides, dtype or self.dtype, self.name)

    def _bad_view(self, msg, api):
        raise_error("err_invalid_view", msg, instruction=api, operand=self.name or None)

    # ---------------------------------------------------------------- indexing
    def __getitem__(self, idx):
        if not isinstance(idx, tuple):
            idx = (idx,)
        if any(i is Ellipsis for i in idx):
            k = idx.index(Ellipsis)
            fill = self.ndim - (len(idx) - 1 - sum(1 for i in idx if i is None))
            idx = idx[:k] + (slice(None),) * fill + idx[k + 1:]
        nreal = sum(1 for i in idx if i is not None)
        if nreal > self.ndim:
            raise_error("err_tensor_access_out_of_bound",
                        f"{nreal} indices for a {self.ndim}-D tensor {list(self.shape)}",
                        instruction="tensor[...]", operand=self.name or None)
        idx = idx + (slice(None),) * (self.ndim - nreal)
        on_chip = self.buffer.on_chip
        off = self.offset
        out = []   # (size, stride, dropped_int)
        d = 0
        for ix in idx:
            if ix is None:
                out.append((1, 0, False))
                continue
            n, s = self.shape[d], self.strides[d]
            if _is_int(ix):
                i = int(ix)
                if i < 0:
                    i += n
                if not 0 <= i < n:
                    raise_error("err_tensor_access_out_of_bound",
                                f"index {int(ix)} exceed dimension size of {n} (dim {d} of "
                                f"{list(self.shape)})", instruction="tensor[...]",
                                operand=self.name or None)
                off += i * s
                out.append((1, s, not (on_chip and d == 0)))
            elif isinstance(ix, slice):
                start, stop, step = ix.start, ix.stop, ix.step
                step = 1 if step is None else operator.index(step)
                if step <= 0:
                    self._bad_view(f"slice step {step} must be positive", "tensor[...]")
                start = 0 if start is None else operator.index(start)
                stop = n if stop is None else operator.index(stop)
                if start < 0:
                    start += n
                if stop < 0:
                    stop += n
                if start < 0 or stop > n or start >= stop:
                    raise_error("err_tensor_access_out_of_bound",
                                f"index range [{start}, {stop - 1}] exceed dimension size of {n} "
                                f"(dim {d} of {list(self.shape)})", instruction="tensor[...]",
                                operand=self.name or None)
                off += start * s
                out.append(((stop - start + step - 1) // step, s * step, False))
            elif isinstance(ix, NkiTensor):
                raise NotImplementedError("indirect (tensor) indexing is not simulated; "
                                          "use static slices")
            else:
                raise TypeError(f"unsupported index {ix!r}")
            d += 1
        keep = [not drop for _, _, drop in out]
        if on_chip:
            # integer indices on free dims drop them, unless that leaves < 2 dims
            need = 2 - sum(keep)
            for i in range(len(out) - 1, -1, -1):
                if need <= 0:
                    break
                if not keep[i]:
                    keep[i] = True
                    need -= 1
        shape = [o[0] for o, k in zip(out, keep) if k]
        strides = [o[1] for o, k in zip(out, keep) if k]
        return self._view(off, shape, strides)

    def __setitem__(self, idx, value):
        ops.language("assign")(self[idx], value)

    # ------------------------------------------------------------------- views
    def slice(self, dim, start, end, step=1):
        idx = [slice(None)] * self.ndim
        idx[dim] = slice(start, end, step)
        return self[tuple(idx)]

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = list(shape)
        if shape.count(-1) == 1:
            known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
            shape[shape.index(-1)] = self.size // max(known, 1)
        shape = tuple(int(s) for s in shape)
        if int(np.prod(shape, dtype=np.int64)) != self.size:
            self._bad_view(f"reshape from {list(self.shape)} to {list(shape)} changes the "
                           f"element count ({self.size} vs {int(np.prod(shape))})", "reshape")
        if self.buffer.on_chip and shape[0] != self.shape[0]:
            self._bad_view(f"reshape from {list(self.shape)} to {list(shape)} changes the "
                           f"partition dimension of an on-chip tensor", "reshape")
        if self.is_contiguous():
            return self._view(self.offset, shape, _c_strides(shape))
        rest = self._view(self.offset, self.shape[1:], self.strides[1:])
        if shape[0] == self.shape[0] and (rest.is_contiguous() or len(self.shape) == 1):
            return self._view(self.offset, shape, (self.strides[0],) + _c_strides(shape[1:]))
        self._bad_view(f"reshape of a non-contiguous view {list(self.shape)} strides "
                       f"{list(self.strides)}", "reshape")

    def reshape_dim(self, dim, shape):
        shape = tuple(shape)
        return self.reshape(self.shape[:dim] + shape + self.shape[dim + 1:])

    def flatten_dims(self, start_dim=1, end_dim=-1):
        end = end_dim % self.ndim
        merged = int(np.prod(self.shape[start_dim:end + 1], dtype=np.int64))
        return self.reshape(self.shape[:start_dim] + (merged,) + self.shape[end + 1:])

    def permute(self, *dims):
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        if sorted(dims) != list(range(self.ndim)):
            self._bad_view(f"permute dims {list(dims)} is not a permutation of {self.ndim} dims",
                           "permute")
        if self.buffer.on_chip and dims[0] != 0:
            self._bad_view("an on-chip view cannot move the partition dimension; use "
                           "nisa.nc_transpose / nl.transpose to move data across partitions",
                           "permute")
        return self._view(self.offset, [self.shape[d] for d in dims],
                          [self.strides[d] for d in dims])

    def transpose(self, *dims):
        return self.permute(*(dims or tuple(reversed(range(self.ndim)))))

    def broadcast(self, shape):
        return self.broadcast_to(shape)

    def broadcast_to(self, shape):
        shape = tuple(int(s) for s in shape)
        if len(shape) < self.ndim:
            self._bad_view(f"cannot broadcast {list(self.shape)} to {list(shape)}", "broadcast_to")
        lead = len(shape) - self.ndim
        src_shape = (1,) * lead + self.shape
        src_str = (0,) * lead + self.strides
        strides = []
        for n_src, s, n in zip(src_shape, src_str, shape):
            if n_src == n:
                strides.append(s)
            elif n_src == 1:
                strides.append(0)
            else:
                self._bad_view(f"cannot broadcast {list(self.shape)} to {list(shape)}",
                               "broadcast_to")
        return self._view(self.offset, shape, strides)

    def expand_dim(self, axis):
        axis = axis if axis >= 0 else axis + self.ndim + 1
        return self._view(self.offset, self.shape[:axis] + (1,) + self.shape[axis:],
                          self.strides[:axis] + (0,) + self.strides[axis:])

    expand_dims = expand_dim

    def squeeze_dim(self, axis):
        axis %= self.ndim
        if self.shape[axis] != 1:
            self._bad_view(f"cannot squeeze dim {axis} of size {self.shape[axis]}", "squeeze_dim")
        if self.buffer.on_chip and self.ndim <= 2:
            self._bad_view("on-chip tensors keep at least 2 dimensions", "squeeze_dim")
        return self._view(self.offset, self.shape[:axis] + self.shape[axis + 1:],
                          self.strides[:axis] + self.strides[axis + 1:])

    def view(self, dtype):
        dtype = dt.canonical(dtype)
        if dtype.itemsize != self.dtype.itemsize:
            self._bad_view(f"view({dt.name_of(dtype)}) changes the element size "
                           f"({self.dtype.itemsize} -> {dtype.itemsize} bytes); only same-size "
                           f"reinterpretation is simulated", "view")
        return self._view(self.offset, self.shape, self.strides, dtype)

    def ap(self, pattern, offset=0, **kw):
        """Explicit access pattern ``[[stride, count], ...]`` (elements) from this view's start.

        For SBUF/PSUM the first entry is the partition entry and its stride must equal the
        storage's free-element count; at most 4 free entries.
        """
        if kw.get("scalar_offset") is not None or kw.get("vector_offset") is not None:
            raise NotImplementedError("dynamic .ap(scalar_offset/vector_offset) is not simulated")
        pattern = [tuple(int(v) for v in p) for p in pattern]
        if self.buffer.on_chip:
            if pattern[0][0] != self._st.row:
                self._bad_view(f"partition stride {pattern[0][0]} must equal the storage's "
                               f"free-element count {self._st.row}", "ap")
            if len(pattern) - 1 > 4:
                raise_error("err_exceed_max_supported_dimension",
                            f"access pattern has {len(pattern) - 1} free dimensions; at most 4",
                            instruction="ap", operand=self.name or None)
        off = self.offset + int(offset)
        hi = off + sum(s * (n - 1) for s, n in pattern)
        if off < 0 or hi >= self._st.size or any(s < 0 or n <= 0 for s, n in pattern):
            raise_error("err_tensor_access_out_of_bound",
                        f"access pattern {pattern} at offset {off} reaches element {hi} of a "
                        f"storage of {self._st.size} elements", instruction="ap",
                        operand=self.name or None)
        return self._view(off, [n for _, n in pattern], [s for s, _ in pattern])

    # ------------------------------------------------------- python operators
    # The operators are the nl.* element-wise functions (see nki._core.ops).
    def _bin(self, other, fname, reverse=False):
        f = getattr(ops, fname)
        return f(other, self) if reverse else f(self, other)

    def __add__(self, o): return self._bin(o, "add")
    def __radd__(self, o): return self._bin(o, "add", True)
    def __sub__(self, o): return self._bin(o, "subtract")
    def __rsub__(self, o): return self._bin(o, "subtract", True)
    def __mul__(self, o): return self._bin(o, "multiply")
    def __rmul__(self, o): return self._bin(o, "multiply", True)
    def __truediv__(self, o): return self._bin(o, "divide")
    def __rtruediv__(self, o): return self._bin(o, "divide", True)
    def __pow__(self, o): return self._bin(o, "power")
    def __neg__(self): return self._bin(-1.0, "multiply")

    def __iadd__(self, o):
        ops.add(self, o, out=self)
        return self

    def __isub__(self, o):
        ops.subtract(self, o, out=self)
        return self

    def __imul__(self, o):
        ops.multiply(self, o, out=self)
        return self

    def same_view(self, other) -> bool:
        return (isinstance(other, NkiTensor) and other._st is self._st
                and other.offset == self.offset and other.shape == self.shape
                and other.strides == self.strides and other.dtype == self.dtype)


def np_view(t) -> np.ndarray:
    """A writable numpy view of tensor ``t`` in its storage (physical) dtype."""
    st = t._st
    flat = st.flat
    if t.dtype != st.dtype or (dt.is_tf32(t.dtype) != dt.is_tf32(st.dtype)):
        phys = dt.storage_dtype(t.dtype, st.np_dtype == st.dtype or dt.is_tf32(st.dtype))
        if phys.itemsize != st.np_dtype.itemsize:
            raise NotImplementedError("view(dtype) across physical sizes needs NKI_PRECISE_FP=1")
        flat = flat.view(phys)
    isz = flat.dtype.itemsize
    strides = [s * isz for s in t.strides]
    if flat.dtype.num >= 256:           # ml_dtypes (user) types: stride through a uint view
        raw = flat.view(f"u{isz}")
        return _as_strided(raw[t.offset:], shape=t.shape, strides=strides).view(flat.dtype)
    return _as_strided(flat[t.offset:], shape=t.shape, strides=strides)
