"""NKI kernels on neuron tensors and as PyTorch custom ops (simulated NeuronCore).

    python examples/nki_op_torch.py

1. An @nki.jit kernel called with device="neuron" tensors reads their memory and returns
   neuron tensors.
2. torch_neuronx.nki_op registers it as a torch custom op: eager, autograd, in place,
   and one node inside torch.compile.
"""
import torch  # loads torch_neuronx (the neuron device)

import nki
import nki.language as nl

try:
    from torch_neuronx import nki_op
except ImportError:
    from torch_neuronx.nki_integration import nki_op


@nki.jit
def scaled_add_kernel(a, b, alpha):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.multiply(nl.load(a), alpha), nl.load(b)))
    return out


@nki.jit(mutable_args=("acc",))
def accumulate_kernel(acc, x):
    nl.store(acc, nl.add(nl.load(acc), nl.load(x)))


@nki_op("nki_examples::scaled_add")
def scaled_add(a: torch.Tensor, b: torch.Tensor, alpha: float) -> torch.Tensor:
    return scaled_add_kernel(a, b, alpha)


@nki_op("nki_examples::accumulate_", mutates_args=("acc",))
def accumulate_(acc: torch.Tensor, x: torch.Tensor) -> None:
    accumulate_kernel(acc, x)


def _setup(ctx, inputs, output):
    ctx.alpha = inputs[2]


def _backward(ctx, grad):
    return scaled_add(grad, torch.zeros_like(grad), ctx.alpha), grad, None


scaled_add.register_autograd(_backward, setup_context=_setup)


def main():
    a = torch.randn(128, 512, device="neuron")
    b = torch.randn(128, 512, device="neuron")

    c = scaled_add_kernel(a, b, 2.0)                       # 1. direct call
    print("direct call:", c.device, torch.allclose(c.cpu(), 2 * a.cpu() + b.cpu()))
    print(nki.last_run().summary())

    w = torch.nn.Parameter(a.clone())                     # 2. custom op + autograd
    scaled_add(w, b, 3.0).sum().backward()
    print("grad == 3:", bool((w.grad.cpu() == 3).all()))

    acc = torch.zeros(128, 512, device="neuron")          # in place
    accumulate_(acc, b)
    print("in place:", torch.equal(acc.cpu(), b.cpu()))

    f = torch.compile(lambda a, b: scaled_add(a, b, 0.5).relu(), backend="aot_eager",
                      fullgraph=True)                      # one graph node
    print("compiled:", torch.allclose(f(a, b).cpu(), (0.5 * a.cpu() + b.cpu()).relu()))


if __name__ == "__main__":
    main()
