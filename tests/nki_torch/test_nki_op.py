"""torch_neuronx.nki_op: NKI kernels as torch custom ops in eager mode, autograd, in-place
mutation and torch.compile (one graph node)."""

import pytest
import torch
from tests.nki_torch.conftest import add_inplace_kernel, add_kernel, neuron, scale_kernel, sum_and_max_kernel

import nki
import nki.language as nl
from torch_neuronx.nki_integration import nki_op


@nki_op("nki_torch_test::add")
def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return add_kernel(a, b)


@nki_op("nki_torch_test::scaled_add", mutates_args=())
def scaled_add(a: torch.Tensor, b: torch.Tensor, alpha: float) -> torch.Tensor:
    return add_kernel(scale_kernel(a, alpha), b)


@nki_op("nki_torch_test::scale")
def scale(a: torch.Tensor, alpha: float) -> torch.Tensor:
    return scale_kernel(a, alpha)


def _scaled_add_setup(ctx, inputs, output):
    ctx.alpha = inputs[2]


def _scaled_add_backward(ctx, grad):
    return scale(grad, ctx.alpha), grad, None


scaled_add.register_autograd(_scaled_add_backward, setup_context=_scaled_add_setup)


@nki_op("nki_torch_test::add_", mutates_args=("x",))
def add_(x: torch.Tensor, y: torch.Tensor) -> None:
    add_inplace_kernel(x, y)


@nki_op("nki_torch_test::row_stats")
def row_stats(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return sum_and_max_kernel(a)


@nki_op("nki_torch_test::axpy")
@nki.jit
def axpy(x: torch.Tensor, y: torch.Tensor, alpha: float = 2.0) -> torch.Tensor:
    """A kernel registered directly: its type hints give the schema."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.multiply(nl.load(x), alpha), nl.load(y)))
    return out


@nki_op("nki_torch_test::axpy_", mutates_args=("y",))
@nki.jit
def axpy_(x: torch.Tensor, y: torch.Tensor, alpha: float) -> None:
    """Directly registered, in place: mutates_args make ``y`` a mutable kernel parameter."""
    nl.store(y, nl.add(nl.multiply(nl.load(x), alpha), nl.load(y)))


# ------------------------------------------------------------------------------- eager
def test_schema_from_type_hints():
    assert str(add._opoverload._schema) == "nki_torch_test::add(Tensor a, Tensor b) -> Tensor"
    assert str(torch.ops.nki_torch_test.scaled_add.default._schema) == \
        "nki_torch_test::scaled_add(Tensor a, Tensor b, float alpha) -> Tensor"
    assert "Tensor(a0!) x" in str(torch.ops.nki_torch_test.add_.default._schema)
    assert str(torch.ops.nki_torch_test.axpy.default._schema) == \
        "nki_torch_test::axpy(Tensor x, Tensor y, float alpha=2.) -> Tensor"
    with pytest.raises(ValueError, match="infer_schema"):
        nki_op("nki_torch_test::nohints", lambda a: add_kernel(a, a))


def test_eager_on_neuron_and_cpu():
    a, b = neuron(128, 64), neuron(128, 64, seed=1)
    out = torch.ops.nki_torch_test.add(a, b)
    assert out.device == a.device
    torch.testing.assert_close(out.cpu(), a.cpu() + b.cpu())
    cpu = add(a.cpu(), b.cpu())                  # CPU tensors through the simulator too
    assert isinstance(cpu, torch.Tensor) and cpu.device.type == "cpu"
    torch.testing.assert_close(cpu, a.cpu() + b.cpu())
    s, m = row_stats(a)
    torch.testing.assert_close(s.cpu(), a.cpu().sum(1, keepdim=True), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(m.cpu(), a.cpu().amax(1, keepdim=True))
    torch.testing.assert_close(axpy(a, b).cpu(), 2 * a.cpu() + b.cpu())
    torch.testing.assert_close(axpy(a, b, 0.5).cpu(), 0.5 * a.cpu() + b.cpu())


def test_fake_impl_comes_from_the_kernel_trace():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        a = mode.from_tensor(neuron(128, 16, dtype=torch.bfloat16))
        s, m = row_stats(a)
        y = axpy(a, a)
    assert (s.shape, s.dtype, s.device.type) == ((128, 1), torch.float32, "neuron")
    assert (m.shape, m.dtype) == ((128, 1), torch.bfloat16)
    assert (y.shape, y.dtype) == ((128, 16), torch.bfloat16)
    # torch's autograd_registration check is NYI for devices other than CPU/CUDA/XPU
    checks = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")
    torch.library.opcheck(row_stats, (neuron(128, 16),), test_utils=checks)
    torch.library.opcheck(axpy_, (neuron(128, 8), neuron(128, 8, seed=1), 2.0), test_utils=checks)
    w = torch.randn(128, 8, requires_grad=True)
    torch.library.opcheck(scaled_add, (w, torch.randn(128, 8), 2.0))   # all checks, on CPU


def test_in_place_mutation_eager():
    x, y = neuron(64, 32), neuron(64, 32, seed=1)
    x0 = x.cpu().clone()
    ptr = x.data_ptr()
    assert add_(x, y) is None
    assert x.data_ptr() == ptr
    torch.testing.assert_close(x.cpu(), x0 + y.cpu())
    y0 = y.cpu().clone()
    axpy_(x, y, 3.0)
    torch.testing.assert_close(y.cpu(), y0 + 3 * x.cpu())


# ---------------------------------------------------------------------------- autograd
def test_register_autograd_trains():
    w = torch.nn.Parameter(neuron(128, 8))
    b = neuron(128, 8, seed=1)
    w0 = w.detach().cpu().clone()
    loss = scaled_add(w, b, 3.0).pow(2).sum()
    loss.backward()
    wr = w0.clone().requires_grad_()
    (3.0 * wr + b.cpu()).pow(2).sum().backward()
    assert w.grad.device == w.device
    torch.testing.assert_close(w.grad.cpu(), wr.grad)
    opt = torch.optim.SGD([w], lr=0.01)
    opt.step()
    torch.testing.assert_close(w.detach().cpu(), w0 - 0.01 * wr.grad)


# ------------------------------------------------------------------------ torch.compile
def _capturing(inner):
    """A dynamo backend recording the graphs it gets, then delegating to ``inner``."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return torch._dynamo.lookup_backend(inner)(gm, example_inputs)
    return backend, graphs


def _op_nodes(gm, packet):
    return [n for n in gm.graph.nodes if n.op == "call_function"
            and getattr(n.target, "overloadpacket", None) is packet]


@pytest.fixture(params=["aot_eager", "neuron"])
def compile_backend(request):
    name = request.param
    torch._dynamo.lookup_backend(name)  # a broken backend fails here, it does not skip
    torch._dynamo.reset()
    if name == "neuron":
        from torch_neuronx.compiler import get_dynamo_metrics
        before = get_dynamo_metrics()["fallbacks"]
        yield name
        # compiled by the backend, not run eagerly after a failed compile
        assert get_dynamo_metrics()["fallbacks"] == before, get_dynamo_metrics()["compile_failures"]
    else:
        yield name
    torch._dynamo.reset()


def test_compile_one_graph_node(compile_backend):
    backend, graphs = _capturing(compile_backend)

    def f(a, b):
        return torch.relu(scaled_add(a, b, 2.0)) + 1

    a, b = neuron(128, 64), neuron(128, 64, seed=1)
    out = torch.compile(f, backend=backend, fullgraph=True)(a, b)
    torch.testing.assert_close(out.cpu(), torch.relu(2 * a.cpu() + b.cpu()) + 1)
    assert len(graphs) == 1
    assert len(_op_nodes(graphs[0], torch.ops.nki_torch_test.scaled_add)) == 1
    assert not _op_nodes(graphs[0], torch.ops.nki_torch_test.add)   # opaque: not traced into


def test_compile_training_step(compile_backend):
    w = torch.nn.Parameter(neuron(128, 8))
    b = neuron(128, 8, seed=1)
    step = torch.compile(lambda w, b: scaled_add(w, b, 3.0).pow(2).sum(),
                         backend=compile_backend, fullgraph=True)
    step(w, b).backward()
    torch.testing.assert_close(w.grad.cpu(), 2 * 3.0 * (3.0 * w.detach().cpu() + b.cpu()))


def test_compile_in_place_mutation(compile_backend):
    def f(x, y):
        add_(x, y)
        return x * 2

    x, y = neuron(64, 32), neuron(64, 32, seed=1)
    x0 = x.cpu().clone()
    out = torch.compile(f, backend=compile_backend, fullgraph=True)(x, y)
    torch.testing.assert_close(x.cpu(), x0 + y.cpu())       # the input was updated in place
    torch.testing.assert_close(out.cpu(), 2 * (x0 + y.cpu()))
