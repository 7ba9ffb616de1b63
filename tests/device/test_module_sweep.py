"""ModuleInfo sweep: every nn module of PyTorch's module database on neuron equals CPU.

For each entry of `torch.testing._internal.common_modules.module_db`, in
float32 and (where the entry lists it) bfloat16, a few sample inputs are run
through the module on CPU and through an identical copy moved with
`.to("neuron")`: forward outputs, gradients of the inputs and of every
parameter, buffers after the training-mode step (BatchNorm statistics), and
a `state_dict` round trip (neuron -> CPU module, CPU -> neuron module) must
agree.

Tolerance policy: the op sweep's (tests/device/test_op_sweep.py). The neuron
device runs the CPU kernels, so results must be bit-identical; modules with
random output are checked for dtype, shape and device only; a module whose
CPU run differs from a second CPU run is compared the same way. The one
exception is listed in DEVICE_PATH_MODULES with its reason: modules for
which ATen itself takes a different kernel for a non-CPU device (recurrent
layers use the fused cells, as on CUDA), compared with assert_close.

A sample that raises on CPU is not a neuron failure: it is reported (in the
test's skip reason when no sample of the module runs on CPU) and not counted.

Cost: SAMPLES samples per module and dtype (the first ones of each entry's
generator, which cover its constructor variants), chosen to keep the sweep
near a minute on 2 cores; MODULE_SAMPLES raises it for a local deep run.
"""
from __future__ import annotations

import copy
import os

import pytest
import torch
from torch.utils._pytree import tree_flatten, tree_map

import expecttest  # noqa: E402,F401  torch.testing._internal needs it; a test dependency, never skipped

from torch.testing._internal.common_modules import module_db  # noqa: E402

SAMPLES = int(os.environ.get("MODULE_SAMPLES", "2"))
DTYPES = (torch.float32, torch.bfloat16)

RANDOM_MODULES = {"nn.FractionalMaxPool2d", "nn.FractionalMaxPool3d"}
DEVICE_PATH_MODULES = {
    name: ("ATen runs the time steps through _thnn_fused_*_cell for a non-CPU input (as on CUDA) "
           "and the CPU through oneDNN or its unfused cell: same math, different rounding")
    for name in ("nn.LSTM", "nn.GRU", "nn.LSTMCell", "nn.GRUCell")
}
# ATen's use_mkldnn takes oneDNN's RNN for any float32 CPU input and the unfused tanh/relu cells
# for neuron; whether their roundings agree depends on the host's ISA (equal bits on the CI hosts
# so far, 1e-6 apart on an AVX512-BF16 host).
DEVICE_PATH_MODULES["nn.RNN"] = "a float32 CPU input runs oneDNN's RNN, a neuron input the unfused cells"
CLOSE = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


class CpuFailed(Exception):
    pass


def _to_neuron(x):
    if isinstance(x, torch.Tensor):
        return x.detach().to("neuron").requires_grad_(x.requires_grad)
    return x


def _fresh(x):
    """A copy of a forward input whose tensors are leaves (deepcopy rejects non-leaves)."""
    if isinstance(x, torch.Tensor):
        return x.detach().clone().requires_grad_(x.requires_grad)
    return copy.deepcopy(x)


def _tensors(x):
    return [t for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor)]


def _equal_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    a, b = a.detach().cpu(), b.detach().cpu()
    if a.dtype.is_floating_point:
        return torch.equal(a.isnan(), b.isnan()) and torch.equal(
            torch.where(a.isnan(), 0, a), torch.where(b.isnan(), 0, b))
    return torch.equal(a, b)


def _check(name, what, expected, actual, mode, dtype):
    exp, act = _tensors(expected), _tensors(actual)
    assert len(exp) == len(act), f"{name} {what}: {len(exp)} tensors on CPU, {len(act)} on neuron"
    for i, (e, a) in enumerate(zip(exp, act)):
        where = f"{name} {what}[{i}]"
        assert a.device.type == "neuron", f"{where} on {a.device}"
        assert (a.dtype, a.shape) == (e.dtype, e.shape), \
            f"{where}: {a.dtype}{tuple(a.shape)} != CPU {e.dtype}{tuple(e.shape)}"
        if mode == "bits":
            assert _equal_bits(e, a), (f"{where}: values differ, max abs diff "
                                       f"{(e.double() - a.detach().cpu().double()).abs().max():.3g}")
        elif mode == "close":
            torch.testing.assert_close(a.detach().cpu(), e.detach(), **CLOSE[dtype], msg=where)


def _run(module, forward_input, grad_seed=0):
    """Forward, then backward of every floating output with fixed random cotangents."""
    args, kwargs = forward_input
    out = module(*args, **kwargs)
    outs = [o for o in _tensors(out) if o.requires_grad]
    inputs = [t for t in _tensors((args, kwargs)) if t.requires_grad]
    params = [p for p in module.parameters() if p.requires_grad]
    grads = []
    if outs and (inputs or params):
        gen = torch.Generator().manual_seed(grad_seed)
        cot = [torch.randn(o.shape, generator=gen, dtype=torch.float32).to(o.dtype).to(o.device)
               for o in outs]
        grads = torch.autograd.grad(outs, inputs + params, cot, allow_unused=True)
        grads = [g for g in grads if g is not None]
    return out, grads, [b for b in module.buffers()]


def _cpu_run(pristine, fwd, init_state=None):
    """The CPU reference: run a copy of `pristine` twice (to spot CPU nondeterminism)."""
    try:
        runs = []
        for _ in range(2):
            module = copy.deepcopy(pristine)
            if init_state is not None:
                module.load_state_dict(init_state)
            torch.manual_seed(1)
            runs.append((module, _run(module, tree_map(_fresh, fwd))))
    except Exception as err:  # noqa: BLE001 - any CPU failure disqualifies the sample
        raise CpuFailed(f"{type(err).__name__}: {str(err).splitlines()[0][:120]}") from None
    (module, result), (_, again) = runs
    deterministic = all(_equal_bits(a, b) for a, b in zip(_tensors(result), _tensors(again)))
    return module, result, deterministic


def _neuron_run(pristine, fwd):
    module = copy.deepcopy(pristine).to("neuron")
    torch.manual_seed(1)
    return module, _run(module, tree_map(_to_neuron, fwd))


def _cases():
    for info in module_db:
        for dtype in DTYPES:
            if dtype in info.dtypes:
                yield pytest.param(info, dtype, id=f"{info.name}-{str(dtype).split('.')[1]}")


@pytest.mark.parametrize("info,dtype", list(_cases()))
def test_module_matches_cpu(info, dtype):
    samples = info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=True,
                                      training=True)[:SAMPLES]
    cpu_failures, ran = [], 0
    for sample in samples:
        if sample.forward_input is None:
            continue
        torch.manual_seed(0)
        cargs, ckwargs = sample.constructor_input.args, sample.constructor_input.kwargs
        fwd = (sample.forward_input.args, sample.forward_input.kwargs)
        try:
            try:
                pristine = info.module_cls(*cargs, **ckwargs).to(dtype).train()
            except Exception as err:  # noqa: BLE001 - the module cannot be built on CPU
                raise CpuFailed(f"constructor: {type(err).__name__}: {err}") from None
            if info.is_lazy:
                # Lazy parameters are drawn at the first forward by the device's own
                # generator: neuron materializes them, and the CPU reference starts from those.
                neuron_module, actual = _neuron_run(pristine, fwd)
                init = {k: v.cpu() for k, v in neuron_module.state_dict().items()}
                cpu_module, expected, deterministic = _cpu_run(pristine, fwd, init)
            else:
                cpu_module, expected, deterministic = _cpu_run(pristine, fwd)
        except CpuFailed as err:
            cpu_failures.append(f"{sample.desc or 'sample'}: {err}")
            continue
        ran += 1
        mode = ("shape" if info.name in RANDOM_MODULES or not deterministic
                else "close" if info.name in DEVICE_PATH_MODULES else "bits")
        if not info.is_lazy:
            neuron_module, actual = _neuron_run(pristine, fwd)
        for what, e, a in zip(("forward", "grads", "buffers"), expected, actual):
            _check(info.name, what, e, a, mode, dtype)
        # state_dict round trip both ways.
        neuron_state = neuron_module.state_dict()
        assert all(t.device.type == "neuron" for t in neuron_state.values())
        back = copy.deepcopy(cpu_module)
        back.load_state_dict({k: v.cpu() for k, v in neuron_state.items()})
        _check(info.name, "state_dict", neuron_state,
               {k: _to_neuron(v) for k, v in back.state_dict().items()}, "bits", dtype)
        neuron_module.load_state_dict(cpu_module.state_dict())
        _check(info.name, "loaded state_dict", cpu_module.state_dict(), neuron_module.state_dict(),
               "bits", dtype)
    if ran == 0:
        pytest.skip(f"no sample runs on CPU itself (reported, not counted): {cpu_failures}")
