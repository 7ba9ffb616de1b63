"""The one error class the simulator raises for broken hardware rules.

Every rule violation raises :class:`NkiValidationError` with a stable ``code``.
Codes that exist in NKI's own error catalogue keep NKI's names; codes we added
for checks NKI's simulator does not make (capacity, PSUM banks, ...) follow the
same ``err_*`` style and are marked ``nki=False`` in :data:`CODES`.
"""
from __future__ import annotations

import os
import sys

__all__ = ["NkiValidationError", "CODES", "raise_error"]

# code -> (from NKI's catalogue?, one-line description, default fix hint)
CODES: dict[str, tuple[bool, str, str]] = {
    "err_num_partition_exceed_arch_limit": (
        True, "partition dimension (dim 0) larger than the 128 partitions",
        "tile dim 0 by nl.tile_size.pmax (128) and loop over the tiles"),
    "err_num_partition_mismatch": (
        True, "operands have different partition counts",
        "make the partition dims equal, e.g. slice or nl.broadcast_to the smaller operand"),
    "err_size_of_dimension_exceed_arch_limit": (
        True, "a dimension is larger than the engine allows",
        "tile that dimension to the limit named in the message (see nl.tile_size)"),
    "err_exceed_max_supported_dimension": (
        True, "operand has more dimensions than the instruction supports",
        "reshape the operand to the rank named in the message"),
    "err_unsupported_memory": (
        True, "operand lives in a buffer this instruction/engine cannot access",
        "move the data to the buffer named in the message first (nl.load / nisa.tensor_copy)"),
    "err_tensor_access_out_of_bound": (
        True, "static index range exceeds the tensor dimension",
        "clamp the slice, e.g. t[i*128:min((i+1)*128, n)]"),
    "err_store_dst_shape_smaller_than_other_shape": (
        True, "destination is smaller than the source",
        "slice the source to the destination shape or enlarge the destination"),
    "err_cannot_update_immutable_parameter": (
        True, "kernel writes an input tensor that was not declared mutable",
        "write to an nl.shared_hbm output instead, or declare the parameter mutable "
        "(annotation nt.mutable_tensor or nki.jit(mutable_args=(name,)))"),
    "err_shared_hbm_must_in_kernel_level": (
        True, "nl.shared_hbm tensor created inside a loop, branch or sub-function",
        "allocate kernel outputs at the top level of the kernel body"),
    "err_tensor_output_not_written_to": (
        True, "a returned output tensor was never written",
        "make sure every returned tensor is stored to (nl.store / nisa.dma_copy)"),
    "err_activation_bias_invalid_type": (
        True, "activation bias must be a (P,1) fp32/fp16/bf16 on-chip vector",
        "pass bias as an SBUF tile of shape (P, 1) with a float dtype"),
    "err_activation_scale_invalid_type": (
        True, "activation scale must be a python number or an fp32 (P,1) vector",
        "pass a float, or an fp32 SBUF tile of shape (P, 1)"),
    "err_activation_scale_scalar_or_vector": (
        True, "activation scale tile must be of shape (P, 1)",
        "reduce the scale tile to shape (P, 1)"),
    "err_nki_api_outside_of_nki_kernel": (
        True, "an nki.language/nki.isa instruction was called outside a running kernel",
        "call the kernel through @nki.jit or nki.simulate(kernel)(...)"),
    "err_annotation_shape_mismatch": (
        True, "argument shape does not match the nt.tensor[...] annotation",
        "pass an argument of the annotated shape"),
    # --- checks NKI's own simulator does not make (our names, same style) ---
    "err_unsupported_reduce_axis": (
        False, "reduction over the partition axis or over non-trailing free axes",
        "reduce only trailing free axes (axis=1, (1, 2), ...); transpose first to reduce partitions"),
    "err_shape_mismatch": (
        False, "operand shapes are incompatible",
        "make the operand shapes (elements per partition) agree"),
    "err_unsupported_dtype": (
        False, "dtype not supported by this instruction or engine",
        "cast to one of the dtypes named in the message"),
    "err_unsupported_op": (
        False, "operator not supported by this instruction or engine",
        "use one of the operators named in the message"),
    "err_psum_bank_overflow": (
        False, "matmul output does not fit one 2 KiB PSUM bank",
        "keep the matmul free size <= nl.tile_size.psum_bank_fmax (512 fp32) within one bank"),
    "err_psum_accumulate_uninitialized": (
        False, "accumulate=True onto PSUM not initialised by a matmul",
        "use accumulate=None (automatic) or start the group with accumulate=False"),
    "err_sbuf_out_of_memory": (
        False, "live SBUF tensors exceed the per-partition capacity of the target",
        "use smaller tiles, fewer live buffers, or free tiles by letting them go out of scope"),
    "err_psum_out_of_banks": (
        False, "more live PSUM tensors than the 8 x 2 KiB banks per partition",
        "evict PSUM results to SBUF and drop the PSUM tiles, or reuse a PSUM tile"),
    "err_output_not_in_shared_hbm": (
        False, "a kernel returned a tensor that is not in nl.shared_hbm",
        "allocate outputs with nl.ndarray(shape, dtype, buffer=nl.shared_hbm)"),
    "err_unsupported_argument_type": (
        False, "kernel argument type not supported by nki.jit",
        "pass arrays, numbers, strings, None or tuples (not lists)"),
    "err_invalid_view": (
        False, "the requested view (reshape/permute/ap/...) is not valid for this tensor",
        "see the message; on-chip views may not change or stride the partition dimension"),
    "err_memset_value_type_mismatch": (
        False, "memset value type does not match the destination dtype",
        "pass a float for float tensors and an int for integer tensors"),
    "err_unsupported_arch": (
        False, "feature not available on the selected target",
        "choose a newer target (NEURON_PLATFORM_TARGET_OVERRIDE=trn2|trn3) or avoid the feature"),
}


def _kernel_location() -> str:
    """file:line of the innermost frame outside the nki package (the kernel source)."""
    pkg = os.path.dirname(os.path.abspath(__file__))
    f = sys._getframe(2)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(pkg + os.sep) or os.sep + "examples" + os.sep in fn[len(pkg):]:
            return f"{os.path.basename(fn)}:{f.f_lineno}"
        f = f.f_back
    return ""


class NkiValidationError(AssertionError):
    """A kernel broke a NeuronCore hardware or NKI language rule.

    Attributes:
        code: stable error code (NKI's catalogue names where they exist).
        instruction: the instruction or API that failed (e.g. ``nisa.nc_matmul``).
        operand: the offending operand name, if any.
        hint: what to do about it.
        location: ``file:line`` in the kernel source, when known.
    """

    def __init__(self, code: str, message: str, *, instruction: str | None = None,
                 operand: str | None = None, hint: str | None = None,
                 location: str | None = None):
        if code not in CODES:
            raise ValueError(f"unknown NKI error code {code!r}")
        self.code = code
        self.instruction = instruction
        self.operand = operand
        self.hint = hint or CODES[code][2]
        self.location = location if location is not None else _kernel_location()
        self.detail = message
        where = f" (at {self.location})" if self.location else ""
        head = f"{instruction}: " if instruction else ""
        text = f"[{code}] {head}{message}{where}. Fix: {self.hint}"
        super().__init__(text)


def raise_error(code: str, message: str, **kw) -> "NoReturn":  # noqa: F821
    raise NkiValidationError(code, message, **kw)
