"""The backend is resolvable as soon as torch is imported, cheaply, and registers
the neuron device with Dynamo and Inductor at the first compile."""
from __future__ import annotations

import torch

from tests.conftest import run_python


def test_backend_listed_without_importing_the_package():
    import torch._dynamo

    assert "neuron" in torch._dynamo.list_backends()


def test_entry_point_resolves_to_our_backend():
    from torch._dynamo.backends.registry import lookup_backend

    import torch_neuronx.compiler

    assert lookup_backend("neuron") is torch_neuronx.compiler.neuron_backend


def test_import_is_cheap_and_lazy():
    result = run_python("""
        import sys, time, torch
        t = time.perf_counter()
        import torch_neuronx.compiler
        elapsed = time.perf_counter() - t
        heavy = [m for m in ("torch._inductor", "torch._dynamo", "torch._inductor.compile_fx") if m in sys.modules]
        print("HEAVY", heavy, "MS", round(elapsed * 1000, 1))
    """)
    assert result.returncode == 0, result.stderr
    assert "HEAVY []" in result.stdout, result.stdout


def test_first_compile_registers_device_interface_and_inductor_backend():
    from torch._dynamo.device_interface import get_interface_for_device
    from torch._inductor.codegen.common import get_scheduling_for_device, get_wrapper_codegen_for_device

    from tests.compiler.conftest import elementwise, neuron_randn

    x, y = neuron_randn(4, 8), neuron_randn(4, 8, seed=1)
    torch.compile(elementwise, backend="neuron")(x, y)
    assert get_interface_for_device("neuron").device_count() == torch.neuron.device_count()
    assert get_interface_for_device("neuron:0").is_triton_capable() is False
    assert get_scheduling_for_device("neuron").__name__ == "CppScheduling"
    assert get_wrapper_codegen_for_device("neuron").__name__ == "NeuronWrapperCodegen"


def test_cpu_alike_list_is_pinned_to_this_torch():
    from torch_neuronx.compiler import _cpu_alike as cpu_alike

    counts = cpu_alike.apply()
    assert set(counts) == {f"{m}.{n}" for m, names in cpu_alike.TARGETS.items() for n in names}
    assert all(c >= 1 for c in counts.values())
    import torch._inductor.scheduler as scheduler

    class Node:
        def get_device(self):
            return torch.device("neuron", 0)

    assert scheduler.BaseSchedulerNode.is_cpu(Node())


def test_plain_inductor_compile_first_registers_neuron():
    """A `torch.compile` with the default backend before any backend="neuron" compile (TorchTitan's
    compiled `create_block_mask`) with the neuron backend's routing of it switched off
    (TORCH_NEURONX_DEFAULT_COMPILE_BACKEND=0): Inductor asks torch.neuron for its codegen, which registers
    neuron in full, the version pass included, and the result equals eager."""
    result = run_python("""
        import torch
        from torch._inductor.codegen.common import custom_backend_passes
        x = torch.arange(12.0, device="neuron").reshape(3, 4)
        y = torch.compile(lambda t: (t.sin() * 2).sum(-1))(x)
        assert y.device.type == "neuron" and torch.equal(y.cpu(), (x.cpu().sin() * 2).sum(-1)), y
        from torch_neuronx.compiler._registration import is_registered
        print("REGISTERED", is_registered(), type(custom_backend_passes["neuron"]).__name__)
        print("NEURON GRAPHS", __import__("torch_neuronx").get_dynamo_metrics()["graphs_compiled"])
    """, env={"TORCH_NEURONX_DEFAULT_COMPILE_BACKEND": "0"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "REGISTERED True NeuronVersionPass" in result.stdout, result.stdout
    assert "NEURON GRAPHS 0" in result.stdout, result.stdout
