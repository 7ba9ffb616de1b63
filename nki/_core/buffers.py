"""Memory buffers: hbm, private_hbm, shared_hbm (device DRAM), sbuf, psum (on chip)."""
from __future__ import annotations

__all__ = ["Buffer", "hbm", "private_hbm", "shared_hbm", "sbuf", "psum",
           "is_hbm", "is_sbuf", "is_psum", "is_on_chip"]


class Buffer:
    """A memory buffer kind. Compare with ``is`` or ``==``; ``.name`` is stable."""

    __slots__ = ("name", "on_chip", "hbm")

    def __init__(self, name: str, on_chip: bool):
        self.name = name
        self.on_chip = on_chip
        self.hbm = not on_chip

    def __repr__(self) -> str:
        return f"nl.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))


hbm = Buffer("hbm", False)
private_hbm = Buffer("private_hbm", False)
shared_hbm = Buffer("shared_hbm", False)
sbuf = Buffer("sbuf", True)
psum = Buffer("psum", True)
_ALL = {b.name: b for b in (hbm, private_hbm, shared_hbm, sbuf, psum)}


def _by_name(name: str) -> Buffer:
    return _ALL[name]


def as_buffer(b) -> Buffer:
    if isinstance(b, Buffer):
        return b
    if isinstance(b, str) and b in _ALL:
        raise TypeError(f"buffer must be an object such as nl.{b}, not the string {b!r} (NKI 0.3+)")
    raise TypeError(f"not an NKI buffer: {b!r}")


def _buf(x) -> Buffer:
    return x if isinstance(x, Buffer) else getattr(x, "buffer")


def is_hbm(x) -> bool:
    return _buf(x).hbm


def is_sbuf(x) -> bool:
    return _buf(x) is sbuf


def is_psum(x) -> bool:
    return _buf(x) is psum


def is_on_chip(x) -> bool:
    return _buf(x).on_chip
