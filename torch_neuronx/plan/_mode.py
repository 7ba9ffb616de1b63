"""The dispatch mode of a dry run: neuron ops on large tensors compute only their output shapes.

Rules, per ATen op that touches neuron memory (see docs/plan.md "How a dry run runs ops"):
- Views, in-place views and metadata ops (resize_, set_) run for real: they touch no data.
- An op whose tensors' storages are all smaller than `config.large_bytes()` (and whose outputs
  are small too) runs for real, on the values it is given, so placeholders stay self-consistent
  (argmax of zero logits is token 0; a loss reads 0.0).
- Any other op runs on meta copies of its arguments, for output shapes and strides. Outputs that
  are inputs (in-place, out=) are the real input tensors; the others are new
  `torch.empty_strided(..., device=neuron)` tensors, so the caching allocator charges what a real
  run charges, and raises the same torch.OutOfMemoryError at the same allocation. New outputs and
  written arguments smaller than the threshold are filled with zeros (every value that depends
  on a phantom tensor reads as zero); larger ones are never written, so no host memory backs them.
- Reads of device values by the host (.item(), bool(), .tolist(), .cpu(), print) are counted per
  source line (_syncs.py). On phantom data they read zeros.
- Ops whose output shape depends on values (nonzero, unique, masked_select, ...) cannot run on
  phantom data: DryRunError names the op and the line.
"""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from ..compiler import run_rng_ops_under
from .. import kernels
from ..estimate.aten_schema import is_view, storage_bytes, written_tensors
from . import _syncs as syncs
from ._errors import DryRunError


_PLAIN_DISPATCH = torch.Tensor.__torch_dispatch__  # plain tensors and Parameters do not override it

_META = torch.device("meta")
_METADATA_OPS = frozenset({"aten::resize_", "aten::set_", "aten::_resize_output_", "aten::resize_as_",
                           "aten::record_stream", "aten::_has_same_storage_numel"})
_COLLECTIVE_NAMESPACES = frozenset({"_c10d_functional", "_c10d_functional_autograd", "c10d"})
_DYNAMIC = torch.Tag.dynamic_output_shape
_DATA_DEPENDENT = torch.Tag.data_dependent_output
_INPLACE_VIEW = torch.Tag.inplace_view


def _is_neuron(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "neuron"


def _integer_index(func, args) -> bool:
    """aten::index by integer tensors only (`freqs[positions]`): its result has the indices' shape,
    so the meta kernel knows it; only boolean masks make aten::index's shape depend on values."""
    if func._schema.name != "aten::index" or len(args) < 2:
        return False
    return all(i is None or (isinstance(i, torch.Tensor) and not i.is_floating_point()
                             and i.dtype not in (torch.bool, torch.uint8)) for i in args[1])


def _returns_tensors(func) -> bool:
    return all("Tensor" in str(r.type) for r in func._schema.returns)


def _target_device(func, args, kwargs, neuron) -> torch.device:
    dev = kwargs.get("device")
    if dev is not None:
        return torch.device(dev)
    for a in args:
        if isinstance(a, torch.device):
            return a
    return neuron[0].device


class DryRunMode(TorchDispatchMode):
    """Pushed for the life of a dry run (under any estimate() mode, which must see our outputs)."""

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True   # Dynamo/AOTAutograd trace on FakeTensors as usual; graphs run their ops here

    def __init__(self, session) -> None:
        super().__init__()
        self.session = session
        self.large = session.large_bytes

    # ---- the per-op decision -------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = self._dispatch(func, args, kwargs or {})
        if self.session.memory.watching:
            self.session.memory.after_op()
        return out

    def _dispatch(self, func, args, kwargs):
        leaves = tree_flatten((args, kwargs))[0]
        tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
        neuron = [t for t in tensors if t.device.type == "neuron"]
        if any(isinstance(t, torch._subclasses.FakeTensor) for t in tensors):
            return func(*args, **kwargs)            # tracing (compile, estimate): not neuron memory
        if any(type(t).__torch_dispatch__ is not _PLAIN_DISPATCH for t in tensors):
            # A wrapper subclass (DTensor, ...) first: it re-dispatches on its local tensors, which come
            # back here. Shaping it here would use its global shape and drop its placement.
            return NotImplemented
        if not neuron and not any(isinstance(x, torch.device) and x.type == "neuron" for x in leaves) \
                and not (kwargs.get("device") is not None and torch.device(kwargs["device"]).type == "neuron"):
            return func(*args, **kwargs)            # a CPU (or meta) op: not ours
        name = func._schema.name
        self.session.count_op(func)
        if name in _METADATA_OPS or _INPLACE_VIEW in func.tags or is_view(func):
            return self._real(func, args, kwargs)
        if func.namespace in _COLLECTIVE_NAMESPACES:
            # the dry run's process group moves no data but records (estimates) each collective:
            # a collective run on meta copies would never reach it
            if name == "_c10d_functional::all_reduce" and storage_bytes(args[0]) >= self.large:
                # its kernel clones the input (a host copy of phantom memory): an output of the
                # same layout, reduced in place by the group, charges the same bytes and copies none
                out = torch.empty(args[0].shape, dtype=args[0].dtype, device=args[0].device)
                torch.ops._c10d_functional.all_reduce_(out, *args[1:], **kwargs)
                return out
            return self._real(func, args, kwargs)
        self.session.fallbacks.record(func, args, kwargs)   # ops TorchNeuron runs on the host CPU
        large = any(storage_bytes(t) >= self.large for t in tensors)
        host_read = self._host_read(func, args, kwargs, neuron)
        if host_read:
            self.session.syncs.record(func, self.session)
        if _DATA_DEPENDENT in func.tags:
            return self._value_read(func, args, kwargs, large)
        if not _returns_tensors(func):
            return self._real(func, args, kwargs)   # metadata queries (is_same_size, ...): no data read
        if not large:
            if _DYNAMIC in func.tags:
                return self._real(func, args, kwargs)   # values are real (small): the shape is known
            try:
                meta_out, back = self._run_meta(func, args, kwargs)
            except Exception:  # noqa: BLE001 - a small op without a meta kernel just runs
                return self._real(func, args, kwargs)
            if not any(storage_bytes(m) >= self.large for m in tree_flatten(meta_out)[0]
                       if isinstance(m, torch.Tensor)):
                return self._real(func, args, kwargs)
        else:
            if _DYNAMIC in func.tags and not _integer_index(func, args):
                raise DryRunError(
                    f"{name} (at {syncs.user_site()}) has an output shape that depends on tensor values, "
                    "which a dry run does not have. Make the shape static (a mask with torch.where, "
                    "nonzero_static, a fixed-size index) or run this step on small tensors.")
            try:
                meta_out, back = self._run_meta(func, args, kwargs)
            except Exception as err:  # noqa: BLE001 - reworded with the fix
                if kernels.output_shapes(name) is not None:
                    raise   # a neuron kernel's own shape function: its error is the op's (bad input, target)
                raise DryRunError(
                    f"{name} (at {syncs.user_site()}) has no meta kernel, so a dry run cannot tell the "
                    f"shape of its result ({type(err).__name__}: {str(err).splitlines()[0][:200]}). "
                    f"Register a shape function with @torch.library.register_fake(\"{name}\"), or keep "
                    "this op's tensors under TORCH_NEURONX_DRY_RUN_LARGE_BYTES so it runs for real."
                ) from None
        return self._placeholders(func, args, kwargs, neuron, meta_out, back)

    # ---- pieces ----------------------------------------------------------------------------
    def _real(self, func, args, kwargs):
        try:
            return func(*args, **kwargs)
        except torch.OutOfMemoryError as err:
            self.session.memory.record_oom(err, syncs.user_site())
            raise

    def _host_read(self, func, args, kwargs, neuron) -> bool:
        """Values move from a neuron core to the host (the next line of Python waits for them)."""
        name = func._schema.name
        if name == "aten::_to_copy":
            dev = kwargs.get("device")
            return bool(neuron) and dev is not None and torch.device(dev).type != "neuron"
        if name == "aten::copy_":
            return args[0].device.type != "neuron" and _is_neuron(args[1])
        return bool(neuron) and _DATA_DEPENDENT in func.tags

    def _value_read(self, func, args, kwargs, large):
        """An op that returns a Python value (.item(), torch.equal): the real value when the data
        is real, else the placeholder a zero tensor gives."""
        if not large:
            return self._real(func, args, kwargs)
        name = func._schema.name
        if name == "aten::_local_scalar_dense":
            t = args[0]
            return False if t.dtype == torch.bool else (0.0 if t.dtype.is_floating_point or t.dtype.is_complex else 0)
        if name == "aten::equal":
            return tuple(args[0].shape) == tuple(args[1].shape)
        raise DryRunError(f"{name} (at {syncs.user_site()}) returns a value computed from a phantom tensor; "
                          "a dry run has no placeholder for it. Compute it on small tensors or skip it "
                          "when torch_neuronx.plan.is_active().")

    def _run_meta(self, func, args, kwargs):
        """func on meta copies (same sizes, strides, dtypes); also meta id -> real argument."""
        back: dict[int, torch.Tensor] = {}
        memo: dict[int, torch.Tensor] = {}

        def to_meta(x):
            if isinstance(x, torch.Tensor):
                m = memo.get(id(x))
                if m is None:
                    m = torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device=_META)
                    memo[id(x)] = m
                    back[id(m)] = x
                return m
            if isinstance(x, torch.device):
                return _META
            return x

        margs = tree_map(to_meta, args)
        mkwargs = tree_map(to_meta, kwargs)
        if "device" in mkwargs and mkwargs["device"] is not None:
            mkwargs["device"] = _META
        shapes = kernels.output_shapes(func._schema.name)  # neuron kernels whose shapes differ from meta's
        out = (shapes or func)(*margs, **mkwargs)
        return out, (back, memo)

    def _placeholders(self, func, args, kwargs, neuron, meta_out, back_memo):
        back, _memo = back_memo
        device = _target_device(func, args, kwargs, neuron) if func._schema.name == "aten::_to_copy" \
            or not neuron else neuron[0].device
        zero_below = self.large

        def fresh(m):
            if not isinstance(m, torch.Tensor):
                return m
            real = back.get(id(m))
            if real is not None:
                return real                                  # in-place / out=: the real argument
            try:
                t = torch.empty_strided(m.size(), m.stride(), dtype=m.dtype, device=device)
            except torch.OutOfMemoryError as err:
                self.session.memory.record_oom(err, syncs.user_site())
                raise
            if 0 < storage_bytes(t) < zero_below:
                t.zero_()                                    # what a phantom input gives, read as zeros
            return t

        out = tree_map(fresh, meta_out)
        for t in written_tensors(func, args, kwargs):
            if 0 < storage_bytes(t) < zero_below:
                t.zero_()
        return out


# activation checkpointing inside compiled graphs calls torch's RNG higher-order ops: run them here
run_rng_ops_under(DryRunMode)
