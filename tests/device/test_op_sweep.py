"""OpInfo sweep: every ATen op on neuron gives the CPU kernel's result.

For each entry of torch's OpInfo database and a few of its sample inputs, the
op runs on CPU and on neuron (every tensor argument replicated onto neuron
with the same sizes, strides, storage offset and aliasing) and the results are
compared bit for bit: the neuron device runs the very CPU kernels through its
zero-copy host fallback, so a deterministic op must reproduce the CPU bits
exactly (NaNs in the same places, the same signed zeros). A mismatch means the
neuron dispatch reached a different kernel (a composite decomposition, a
device-branching path) or the fallback mishandled an argument or a result.

Ops whose values cannot be compared are still run, and checked for dtype,
shape and device only:
  * random ops (the neuron generator draws from its own engine state),
  * ops returning uninitialized memory (empty*, new_empty*),
  * ops whose CPU result differs from one CPU run to the next.
Samples that fail on CPU are skipped; an error on neuron where CPU succeeds is
a failure. Known, understood limitations are listed in KNOWN_FAILURES with
their reason and are strict xfails, so a fix shows up as XPASS.

Tests (each parametrized per OpInfo, so a failure names the op):
  test_op_matches_cpu      forward; float32 (also non-contiguous and channels-last),
                           int64, bool, bfloat16, complex64 samples
  test_inplace_matches_cpu in-place variants (result values, identity of the return)
  test_out_matches_cpu     out= variants (wrong-sized outs get resized; identity)
  test_grad_matches_cpu    gradients of float32 differentiable ops
  test_cpu_kernels_not_decomposed  static: no aten op with a CPU kernel resolves to a
                           composite kernel on PrivateUse1
  test_crash_canary        minimal repro of each known segfault (CRASH_CAUSES)

Needs `expecttest` (imported by torch.testing._internal): a test dependency, so a missing one fails
the run (tests/conftest.py checks every test dependency before collection).
"""
from __future__ import annotations

import itertools
import math
import subprocess
import sys

import pytest
import torch

from torch.testing._internal.common_methods_invocations import op_db

NEURON = torch.device("neuron")

# Samples per op and dtype: float32 gets the most; the others a smoke check.
SAMPLES = {torch.float32: 4, torch.int64: 2, torch.bool: 1, torch.bfloat16: 2,
           torch.complex64: 1}
BACKWARD_SAMPLES = 2

# Random ops: the neuron generator has its own state, so values differ from
# CPU's by design; only dtype, shape and device are compared.
RANDOM_OPS = {
    "bernoulli", "multinomial", "normal", "rand_like", "randint_like", "randn_like",
    "randint", "randn", "rand", "randperm", "uniform", "cauchy", "exponential",
    "geometric", "log_normal", "nn.functional.dropout", "nn.functional.dropout2d",
    "nn.functional.dropout3d", "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout", "nn.functional.rrelu",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
    "nn.functional.gumbel_softmax", "poisson",
}
# Ops that are random only for some samples (dropout_p > 0: scaled_dot_product_attention,
# multi_head_attention_forward) are caught by running CPU twice: a result CPU does not
# reproduce is compared by dtype, shape and device only.
# Ops returning uninitialized memory: values are meaningless.
UNINITIALIZED_OPS = {
    "empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided",
    "empty_permuted", "resize_", "resize_as_",
}

# Ops seen giving two different results on CPU for one sample (filled as the sweep runs).
CPU_NONDETERMINISTIC: set[str] = set()

# ---------------------------------------------------------- known failures
# op full name -> reason. Real, understood limitations only (strict xfail: a fix
# shows up as XPASS and fails the run until the entry is removed).

_SPARSE = ("sparse results: the neuron device supports strided tensors only (the fallback "
           "raises a clear error naming the op); SparsePrivateUse1 is unsupported")
KNOWN_FAILURES: dict[str, str] = {
    "to_sparse": _SPARSE,
}
KNOWN_BACKWARD_FAILURES: dict[str, str] = {
    "to_sparse": _SPARSE,
}
KNOWN_INPLACE_FAILURES: dict[str, str] = {}
KNOWN_OUT_FAILURES: dict[str, str] = {}

# Ops that kill the process (SIGSEGV), so they cannot be xfails. Each crash has a
# root cause with a minimal repro (its canary, run in a subprocess); an op listed under
# a cause is skipped only while that canary still crashes, and test_crash_canary[cause]
# turns XPASS once the cause is fixed.
CRASH_CAUSES = {
    "conj_copy": (
        "SIGSEGV: a neuron tensor with the conj/neg bit recurses forever when copied: "
        "copy_ -> _copy_from -> Conjugate/Negative fallback (no fallthrough for _copy_from) "
        "-> clone -> copy_ -> ... (stack overflow)",
        "import torch\n"
        "x = torch.ones(3, dtype=torch.complex64, device='neuron')\n"
        "assert torch.equal(x.conj().resolve_conj().cpu(), torch.ones(3, dtype=torch.complex64))\n"
        "assert torch.equal(x._neg_view().resolve_neg().cpu(), -torch.ones(3, dtype=torch.complex64))\n",
    ),
    "zerotensor": (
        "SIGSEGV: _efficientzerotensor(device='neuron') goes through the fallback, which drops "
        "the ZeroTensor key and adopts the CPU zero tensor's null 0-byte storage; reading it "
        "dereferences NULL (sgn's backward of a real input returns one)",
        "import torch\n"
        "z = torch._efficientzerotensor(3, device='neuron')\n"
        "assert torch.equal(z.cpu(), torch.zeros(3))\n",
    ),
}
# Ops whose crash cause (CRASH_CAUSES) is fixed are no longer listed here; the
# causes stay as regression tests (test_former_crash_causes).
CRASHES: dict[str, dict[str, str]] = {"forward": {}, "out": {}, "backward": {}, "inplace": {}
}


def _canary_crashes(code: str) -> bool:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    return proc.returncode != 0


STILL_CRASHING = {cause for cause in set().union(*CRASHES.values())
                  if _canary_crashes(CRASH_CAUSES[cause][1])}


def full_name(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


# ----------------------------------------------------------------- replication


class Replicator:
    """Copies a (nested) sample onto a device, keeping layout and aliasing.

    Each CPU storage is copied once, whole, and every tensor becomes an
    as_strided view of its copy: strides, storage offsets and aliasing between
    arguments are those of the sample, so the kernels see the same memory
    layout (summation order, overlap checks) on both devices.
    """

    def __init__(self, device):
        self.device = torch.device(device)
        self.bases = {}

    def tensor(self, t: torch.Tensor) -> torch.Tensor:
        if t.layout != torch.strided:
            raise NotImplementedError(f"layout {t.layout}")
        requires_grad = t.requires_grad
        t = t.detach()
        if t.is_conj():
            t = t.resolve_conj()
        if t.is_neg():
            t = t.resolve_neg()
        storage = t.untyped_storage()
        key = (storage.data_ptr(), storage.nbytes(), t.dtype)
        base = self.bases.get(key)
        if base is None:
            numel = storage.nbytes() // t.element_size()
            flat = t.new_empty(0).set_(storage, 0, (numel,), (1,))
            base = flat.clone().to(self.device) if numel else torch.empty(
                0, dtype=t.dtype, device=self.device)
            self.bases[key] = base
        out = base.as_strided(t.size(), t.stride(), t.storage_offset())
        if requires_grad:
            out = out.requires_grad_()
        return out

    def __call__(self, x, key=None):
        if isinstance(x, torch.Tensor):
            return self.tensor(x)
        if isinstance(x, torch.device):
            return self.device if x.type == "cpu" else x
        if isinstance(x, str) and (x == "cpu" or x.startswith("cpu:")):
            return str(self.device)  # a device string (`to("cpu")`, `device="cpu"`)
        if isinstance(x, list):
            return [self(v) for v in x]
        if isinstance(x, tuple) and not hasattr(x, "_fields"):
            return tuple(self(v) for v in x)
        if isinstance(x, dict):
            return {k: self(v, key=k) for k, v in x.items()}
        return x


# Arguments that stay on CPU on every device (as on CUDA): op -> positional indices in args.
HOST_ARGS = {"tensor_split": (0,)}


def replicate_sample(sample, device, op_name=""):
    rep = Replicator(device)
    keep = HOST_ARGS.get(op_name, ())
    args = tuple(a if i in keep else rep(a) for i, a in enumerate(sample.args))
    return rep(sample.input), args, rep(dict(sample.kwargs))


# ----------------------------------------------------------------- comparison


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's values as integers (bitwise identity, NaNs and -0.0 included)."""
    t = t.detach().cpu()
    if t.is_complex():
        t = torch.view_as_real(t.resolve_conj())
    t = t.contiguous()
    if t.dtype.is_floating_point:
        return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64, 1: torch.int8}[
            t.element_size()])
    return t


def _strides(t):
    """Strides that matter: those of dims longer than 1."""
    return tuple(st for sz, st in zip(t.shape, t.stride()) if sz > 1)


def flatten(x, path="out"):
    if isinstance(x, torch.Tensor):
        yield path, x
    elif isinstance(x, (list, tuple)) and not isinstance(x, torch.Size):
        for i, v in enumerate(x):
            yield from flatten(v, f"{path}[{i}]")
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from flatten(v, f"{path}[{k!r}]")
    else:
        yield path, x


def compare(expected, actual, values=True, device="neuron"):
    """Return a description of the first difference, or None."""
    exp = list(flatten(expected))
    act = list(flatten(actual))
    if len(exp) != len(act):
        return f"structure differs: {len(exp)} leaves on cpu, {len(act)} on neuron"
    for (path, e), (_, a) in zip(exp, act):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                return f"{path}: cpu gave a tensor, neuron gave {type(a).__name__}"
            if e.device.type == "cpu" and a.device.type != device:
                return f"{path}: result on {a.device}, expected {device}"
            if e.dtype != a.dtype:
                return f"{path}: dtype {a.dtype} != cpu {e.dtype}"
            if e.shape != a.shape:
                return f"{path}: shape {tuple(a.shape)} != cpu {tuple(e.shape)}"
            if e.layout != torch.strided or a.layout != torch.strided:
                if e.layout != a.layout:
                    return f"{path}: layout {a.layout} != cpu {e.layout}"
                continue
            if not values or e.numel() == 0:
                continue
            if _strides(e) != _strides(a):
                return f"{path}: strides {a.stride()} != cpu {e.stride()} (shape {tuple(e.shape)})"
            eb, ab = _bits(e), _bits(a)
            if not torch.equal(eb, ab):
                diff = (ab != eb)
                n = int(diff.sum())
                detail = ""
                if e.dtype.is_floating_point or e.is_complex():
                    ef, af = e.detach().cpu().double(), a.detach().cpu().double()
                    both = torch.isfinite(ef) & torch.isfinite(af)
                    if both.any():
                        detail = f", max abs diff {float((ef - af)[both].abs().max()):.3g}"
                    nan = torch.isnan(ef) != torch.isnan(af)
                    if nan.any():
                        detail += f", NaN positions differ at {int(nan.sum())}"
                return f"{path}: values differ at {n}/{e.numel()} elements{detail}"
        elif isinstance(a, torch.Tensor):
            return f"{path}: cpu gave {type(e).__name__}, neuron gave a tensor"
        elif values:
            same = e == a or (isinstance(e, float) and math.isnan(e) and math.isnan(a))
            if not same:
                return f"{path}: {a!r} != cpu {e!r}"
    return None


# ------------------------------------------------------------------- sampling


def dtypes_for(op):
    supported = op.supported_dtypes("cpu")
    chosen = [d for d in SAMPLES if d in supported]
    if not chosen and supported:
        chosen = [sorted(supported, key=str)[0]]
    return chosen


def samples(op, dtype, n, requires_grad=False):
    torch.manual_seed(0)
    # sample_inputs_func directly: op.sample_inputs wraps it in TrackedInputIter, whose
    # inspect.stack() walk costs ~0.2 s per call under pytest.
    gen = op.sample_inputs_func(op, "cpu", dtype, requires_grad)
    for s in itertools.islice(gen, n):
        if isinstance(s.input, torch.Tensor) and s.input.layout != torch.strided:
            continue
        yield s


def values_comparable(op, sample=None):
    if op.name in RANDOM_OPS or op.name in UNINITIALIZED_OPS:
        return False
    if getattr(op, "has_nondeterministic_output", False):
        return False
    # LAPACK gelsy reads its jpvt argument as initial column pivots, and ATen passes it
    # uninitialized (at::empty): CPU lstsq with driver='gelsy' differs run to run.
    if sample is not None and op.name == "linalg.lstsq" and sample.kwargs.get("driver") == "gelsy":
        return False
    return True


class Case:
    """One sample of one op, replicated on CPU (twice) and on neuron."""

    def __init__(self, op, sample):
        self.op, self.sample = op, sample

    def args(self, device):
        return replicate_sample(self.sample, device, self.op.name)

    def compare(self, fn, check_values=True):
        """Run fn(inp, args, kwargs) on both devices; None if equal, else a message.

        Raises _CpuFailed when the CPU run raises (the sample is not valid).
        """
        neuron_args = self.args(NEURON)  # replicate first: the CPU runs may mutate the sample
        try:
            expected = fn(*self.args("cpu"))
        except Exception as err:
            raise _CpuFailed(f"{type(err).__name__}: {err}"[:200]) from err
        try:
            actual = fn(*neuron_args)
        except Exception as err:
            return f"neuron raised {type(err).__name__}: {str(err)[:300]}"
        check_values = check_values and values_comparable(self.op, self.sample)
        msg = compare(expected, actual, values=check_values)
        if msg is not None and check_values:
            # A result CPU itself does not reproduce is compared by metadata only.
            for _ in range(2):
                if compare(expected, fn(*self.args("cpu")), device="cpu") is not None:
                    CPU_NONDETERMINISTIC.add(full_name(self.op))
                    return compare(expected, actual, values=False)
        return msg


class _CpuFailed(Exception):
    pass


def _channels_last(t):
    return t.to(memory_format=torch.channels_last) if isinstance(t, torch.Tensor) and t.dim() == 4 else t


def layout_variants(sample):
    """The sample as given, non-contiguous, and channels-last (when it has 4-D tensors)."""
    yield "", sample
    yield "noncontiguous ", sample.noncontiguous()
    if any(isinstance(t, torch.Tensor) and t.dim() == 4
           for _, t in flatten((sample.input, sample.args, sample.kwargs))):
        yield "channels_last ", sample.transform(_channels_last)


def sweep(op, fn_for, dtypes, n_samples, requires_grad=False, layouts=False):
    """Compare fn_for(op, sample) on every chosen sample; return (compared, problems, cpu_errors).

    With layouts, the first float32 sample also runs non-contiguous and channels-last.
    """
    compared, problems, cpu_errors = 0, [], []
    for dtype in dtypes:
        chosen = samples(op, dtype, n_samples.get(dtype, 1), requires_grad)
        variants = ((f"{v}sample {i}", i, vs) for i, s in enumerate(chosen)
                    for v, vs in (layout_variants(s) if layouts and i == 0
                                  and dtype == torch.float32 else [("", s)]))
        for label, i, sample in variants:
            fn = fn_for(op, sample, i)
            if fn is None:
                continue
            try:
                msg = Case(op, sample).compare(fn)
            except _CpuFailed as err:
                cpu_errors.append(str(err))
                continue
            except NotImplementedError:  # a sample layout we do not replicate
                continue
            compared += 1
            if msg is not None:
                problems.append(f"[{dtype}, {label}: {_describe(sample)}] {msg}")
    return compared, problems, cpu_errors


def _describe(sample):
    def d(x):
        if isinstance(x, torch.Tensor):
            return f"T{tuple(x.shape)}" + ("" if x.is_contiguous() else f"s{x.stride()}")
        if isinstance(x, (list, tuple)):
            return "[" + ",".join(d(v) for v in x) + "]"
        return repr(x)[:40]
    kw = ",".join(f"{k}={d(v)}" for k, v in sample.kwargs.items())
    return f"{d(sample.input)} args={d(sample.args)} {kw}".strip()


def _outcome(op, compared, problems, cpu_errors, what):
    assert not problems, f"{full_name(op)} {what}:\n  " + "\n  ".join(problems)
    if compared == 0:
        pytest.skip("no sample runs on CPU" + (f": {cpu_errors[0]}" if cpu_errors else ""))


def _params(ops, known, kind):
    params, seen = [], set()
    for op in ops:
        name = full_name(op)
        if name in seen:
            continue
        seen.add(name)
        marks = [pytest.mark.xfail(reason=known[name], strict=True)] if name in known else []
        cause = CRASHES[kind].get(name)
        if cause in STILL_CRASHING:
            marks = [pytest.mark.skip(reason=CRASH_CAUSES[cause][0])]
        params.append(pytest.param(op, id=name, marks=marks))
    return params


@pytest.mark.parametrize("cause", list(CRASH_CAUSES))
def test_former_crash_causes(cause):
    """Minimal repro of each segfault the sweep once found; each must now run cleanly."""
    proc = subprocess.run([sys.executable, "-c", CRASH_CAUSES[cause][1]], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, f"rc {proc.returncode}: {proc.stderr[-500:]}"


# -------------------------------------------------------------------- forward


def forward_fn(op, sample, i):
    def fn(inp, args, kwargs):
        with torch.no_grad():
            return op.op(inp, *args, **kwargs)
    return fn


def check_forward(op):
    return sweep(op, forward_fn, dtypes_for(op), SAMPLES, layouts=True)


@pytest.mark.parametrize("op", _params(op_db, KNOWN_FAILURES, "forward"))
def test_op_matches_cpu(op):
    _outcome(op, *check_forward(op), "forward")


# -------------------------------------------------- in-place and out= variants


def inplace_fn(op, sample, i):
    if op.inplace_variant is None or sample.broadcasts_input:
        return None

    def fn(inp, args, kwargs):
        with torch.no_grad():
            ret = op.inplace_variant(inp, *args, **kwargs)
        assert ret is inp, "in-place variant did not return its input"
        return inp
    return fn


def out_fn(op, sample, i):
    if not op.supports_out:
        return None

    def fn(inp, args, kwargs):
        with torch.no_grad():
            ref = op.op(inp, *args, **kwargs)  # on this device, for the out tensors' geometry
            tensors = [t for _, t in flatten(ref)]
            if not all(isinstance(t, torch.Tensor) for t in tensors):
                return ref
            # Sample 0: wrong-sized outs (the kernel resizes them); others: right-sized.
            outs = [t.new_empty(0) if i == 0 else torch.empty_like(t) for t in tensors]
            out = outs[0] if isinstance(ref, torch.Tensor) else tuple(outs)
            ret = op.op(inp, *args, out=out, **kwargs)
            for r, o in zip([t for _, t in flatten(ret)], outs):
                assert r is o, "out= variant did not return its out tensor"
            return out
    return fn


def _f32(op):
    return [torch.float32] if torch.float32 in op.supported_dtypes("cpu") else dtypes_for(op)[:1]


@pytest.mark.parametrize("op", _params([o for o in op_db if o.inplace_variant is not None],
                                       KNOWN_INPLACE_FAILURES, "inplace"))
def test_inplace_matches_cpu(op):
    _outcome(op, *sweep(op, inplace_fn, _f32(op), {torch.float32: 2}), "in-place")


@pytest.mark.parametrize("op", _params([o for o in op_db if o.supports_out], KNOWN_OUT_FAILURES, "out"))
def test_out_matches_cpu(op):
    _outcome(op, *sweep(op, out_fn, _f32(op), {torch.float32: 2}), "out=")


# ------------------------------------------------------------------- backward


def differentiable_ops():
    out = []
    for op in op_db:
        if not op.supports_autograd or not values_comparable(op):
            continue
        if torch.float32 not in op.supported_backward_dtypes("cpu"):
            continue
        out.append(op)
    return out


def backward_fn(op, sample, i):
    def fn(inp, args, kwargs):
        out = op.op(inp, *args, **kwargs)
        leaves = [t for _, t in flatten((inp, args, kwargs))
                  if isinstance(t, torch.Tensor) and t.requires_grad]
        outs = [t for _, t in flatten(out) if isinstance(t, torch.Tensor) and t.requires_grad
                and t.dtype.is_floating_point]
        if not leaves or not outs:
            return None
        g = torch.Generator().manual_seed(i)
        cots = [torch.randn(o.shape, generator=g, dtype=o.dtype).to(o.device) for o in outs]
        return list(torch.autograd.grad(outs, leaves, cots, allow_unused=True))
    return fn


@pytest.mark.parametrize("op", _params(differentiable_ops(), KNOWN_BACKWARD_FAILURES, "backward"))
def test_grad_matches_cpu(op):
    _outcome(op, *sweep(op, backward_fn, [torch.float32], {torch.float32: BACKWARD_SAMPLES},
                        requires_grad=True), "backward")


# ------------------------------------------------------------- dispatch table

# aten ops with a CPU kernel that neuron still sends to a composite kernel -> reason.
KNOWN_DECOMPOSED: dict[str, str] = {
}


def test_cpu_kernels_not_decomposed():
    """Every aten op with a CPU kernel reaches a neuron kernel, not a composite one."""
    decomposed = set()
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::"):
            continue
        if not torch._C._dispatch_has_kernel_for_dispatch_key(name, "CPU"):
            continue
        entry = [line for line in torch._C._dispatch_dump_table(name).splitlines()
                 if line.startswith("PrivateUse1:")]
        if entry and ("[math kernel]" in entry[0] or "[default backend kernel]" in entry[0]):
            decomposed.add(name)
    new = sorted(decomposed - set(KNOWN_DECOMPOSED))
    fixed = sorted(set(KNOWN_DECOMPOSED) - decomposed)
    assert not new, f"ops with a CPU kernel run a composite kernel on neuron: {new}"
    assert not fixed, f"fixed, remove from KNOWN_DECOMPOSED: {fixed}"
