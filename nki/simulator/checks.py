"""Validation helpers shared by nki.isa and nki.language: buffer placement, partitions, shapes."""
from __future__ import annotations


from .._core.tensor import NkiTensor
from ..errors import raise_error

PMAX = 128


def tensor(x, instr: str, operand: str):
    if not isinstance(x, NkiTensor):
        raise TypeError(f"{instr}: operand '{operand}' must be an NKI tensor, got {type(x).__name__}")
    return x


def buffer_in(x, allowed, instr: str, operand: str, why: str = "") -> None:
    """err_unsupported_memory unless ``x.buffer.name`` is in ``allowed``."""
    name = x.buffer.name
    ok = set(allowed)
    if "hbm" in ok:
        ok |= {"private_hbm", "shared_hbm"}
    if name not in ok:
        want = "' or '".join(sorted(allowed))
        raise_error("err_unsupported_memory",
                    f"Expected operand '{operand}' of '{instr}' to be in address space '{want}', "
                    f"but got a tile in '{name}'" + (f" ({why})" if why else ""),
                    instruction=instr, operand=operand)


def on_chip(x, instr: str, operand: str, engine: str = "") -> None:
    buffer_in(x, ("sbuf", "psum"), instr, operand,
              f"the {engine} engine reads and writes SBUF/PSUM only" if engine else "")


def pmax(x, instr: str, operand: str) -> None:
    if x.shape and x.shape[0] > PMAX:
        raise_error("err_num_partition_exceed_arch_limit",
                    f"number of partitions {x.shape[0]} of operand '{operand}' exceed "
                    f"architecture limitation of {PMAX}", instruction=instr, operand=operand)


def same_partitions(a, b, instr: str, na: str, nb: str) -> None:
    if a.shape[0] != b.shape[0]:
        raise_error("err_num_partition_mismatch",
                    f"operand '{na}' has {a.shape[0]} partitions but '{nb}' has {b.shape[0]}",
                    instruction=instr, operand=nb)


def free_size(x) -> int:
    n = 1
    for s in x.shape[1:]:
        n *= s
    return n


def same_free(a, b, instr: str, na: str, nb: str) -> None:
    if free_size(a) != free_size(b):
        raise_error("err_shape_mismatch",
                    f"operand '{na}' {list(a.shape)} and '{nb}' {list(b.shape)} have different "
                    f"numbers of elements per partition ({free_size(a)} vs {free_size(b)})",
                    instruction=instr, operand=nb)


def max_dim(x, dim: int, limit: int, instr: str, operand: str, what: str) -> None:
    if x.shape[dim] > limit:
        raise_error("err_size_of_dimension_exceed_arch_limit",
                    f"{what} of operand '{operand}' is {x.shape[dim]}, exceeding the "
                    f"architecture limit of {limit}", instruction=instr, operand=operand)


def rank(x, n: int, instr: str, operand: str) -> None:
    if x.ndim != n:
        raise_error("err_exceed_max_supported_dimension",
                    f"operand '{operand}' has {x.ndim} dimensions {list(x.shape)}; {instr} "
                    f"requires exactly {n}", instruction=instr, operand=operand)


def at_most_one_psum(tensors, names, instr: str) -> None:
    ps = [n for t, n in zip(tensors, names) if t is not None and t.buffer.name == "psum"]
    if len(ps) > 1:
        raise_error("err_unsupported_memory",
                    f"operands {ps} are all in 'psum'; the Vector engine reads at most one PSUM "
                    f"input", instruction=instr, operand=ps[1])


def pvector(x, instr: str, operand: str, parts: int):
    """A scalar operand given as an on-chip (P, 1) vector."""
    on_chip(x, instr, operand)
    if free_size(x) != 1:
        raise_error("err_shape_mismatch",
                    f"operand '{operand}' {list(x.shape)} must be a (P, 1) vector",
                    instruction=instr, operand=operand)
    if x.shape[0] != parts:
        raise_error("err_num_partition_mismatch",
                    f"operand '{operand}' has {x.shape[0]} partitions but data has {parts}",
                    instruction=instr, operand=operand)


def on_chip_operands(instr: str, engine: str, **operands) -> None:
    """The operand checks every on-chip engine instruction starts with: each
    operand is an NKI tensor and lives in SBUF/PSUM as `engine` requires."""
    for name, x in operands.items():
        tensor(x, instr, name)
    for name, x in operands.items():
        on_chip(x, instr, name, engine)


def same_elements_on_chip(instr: str, engine: str, dst, src, src_name: str) -> None:
    """The checks of a one-source element-wise instruction: both operands NKI tensors in
    SBUF/PSUM, and ``src`` with dst's partitions and elements per partition."""
    on_chip_operands(instr, engine, dst=dst, **{src_name: src})
    same_partitions(src, dst, instr, src_name, "dst")
    same_free(src, dst, instr, src_name, "dst")


def sbuf_operands(instr: str, why: str, **operands) -> None:
    """Each operand is an NKI tensor in SBUF (the GpSimd engine accesses no other memory)."""
    for name, x in operands.items():
        tensor(x, instr, name)
    for name, x in operands.items():
        buffer_in(x, ("sbuf",), instr, name, why)
