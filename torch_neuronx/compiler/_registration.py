"""Register the neuron device with Dynamo and Inductor (lazily, at first compile).

Four registries, all keyed by the device-type string:
- Dynamo's device interface (`register_interface_for_device`);
- Inductor's backend for the device: CppScheduling (the CPU C++/OpenMP kernel
  generator, unchanged: neuron memory is host memory) and a small Python
  wrapper subclass;
- the device op overrides the Python wrapper asks for (streams, guards);
- a device post-grad pass whose `uuid()` is our backend version, so that the
  FX-graph and AOTAutograd caches never serve a program of an older backend.
Then the CPU-alike adjustments (_cpu_alike.py) and the RNG higher-order ops
that activation checkpointing uses inside graphs (_rng_hops.py), and the
vector-ISA load markers (_vec_isa.py) that spare each new process ~2 s of probes.

`register()` is idempotent; after it, `backend="inductor"` also works on neuron inputs.
"""
from __future__ import annotations

import threading

import torch

from .._torch_versions import require

DEVICE = "neuron"
# The torch minors whose PythonWrapperCodegen (create, _generate_kernel_call_helper, make_allocation,
# generate_after_suffix: called once `call` is defined, before the benchmark harness)
# the wrapper subclass below overrides were checked against.
WRAPPER_WRITTEN_FOR = ("2.13", "2.14", "2.15")
_lock = threading.Lock()
_done = False


def _neuron():
    return torch.neuron


class NeuronCodegenProperties:
    """torch.neuron's device properties plus what Inductor's C++ path asks of a
    CPU (`multi_processor_count`: the host threads the kernels run on)."""

    def __init__(self, props) -> None:
        self._props = props
        self.multi_processor_count = torch.get_num_threads()

    def __getattr__(self, name):
        return getattr(self._props, name)

    def __repr__(self) -> str:
        return f"NeuronCodegenProperties({self._props!r}, multi_processor_count={self.multi_processor_count})"


def _properties(device=None) -> NeuronCodegenProperties:
    if isinstance(device, int) or device is None:
        props = torch.neuron.get_device_properties(device if device is not None else torch.neuron.current_device())
    else:
        props = torch.neuron.get_device_properties(device)
    return NeuronCodegenProperties(props)


def _make_device_interface():
    from torch._dynamo.device_interface import DeviceInterface

    class NeuronInterface(DeviceInterface):
        class device:  # noqa: N801 - DeviceInterface API
            def __new__(cls, device):
                return _neuron().device(device)

        Event = torch.Event
        Stream = torch.Stream

        class Worker:
            @staticmethod
            def set_device(device: int) -> None:
                _neuron().set_device(device)

            @staticmethod
            def current_device() -> int:
                return _neuron().current_device()

            @staticmethod
            def get_device_properties(device=None):
                return _properties(device)

        @staticmethod
        def current_device() -> int:
            return _neuron().current_device()

        @staticmethod
        def set_device(device) -> None:
            _neuron().set_device(device)

        @staticmethod
        def maybe_exchange_device(device: int) -> int:
            prev = _neuron().current_device()
            if device != prev:
                _neuron().set_device(device)
            return prev

        exchange_device = maybe_exchange_device

        @staticmethod
        def device_count() -> int:
            return _neuron().device_count()

        @staticmethod
        def is_available() -> bool:
            return _neuron().is_available()

        @staticmethod
        def stream(stream):
            return _neuron().stream(stream)

        @staticmethod
        def current_stream():
            return _neuron().current_stream()

        @staticmethod
        def set_stream(stream) -> None:
            _neuron().set_stream(stream)

        @staticmethod
        def get_raw_stream(device_idx: int) -> int:
            return 0  # the virtual core executes synchronously on the host

        @staticmethod
        def synchronize(device=None) -> None:
            _neuron().synchronize(device)

        @classmethod
        def get_device_properties(cls, device=None):
            return _properties(device)

        @staticmethod
        def get_compute_capability(device=None):
            return ""

        @staticmethod
        def is_bf16_supported(including_emulation: bool = False) -> bool:
            return True

        @staticmethod
        def memory_allocated(device=None) -> int:
            return _neuron().memory_allocated(device)

        @staticmethod
        def is_triton_capable(device=None) -> bool:
            return False

    return NeuronInterface


def _make_op_overrides():
    from torch._inductor.codegen.common import DeviceOpOverrides

    class NeuronDeviceOpOverrides(DeviceOpOverrides):
        def import_get_raw_stream_as(self, name: str) -> str:
            return f"def {name}(idx): return 0"

        def set_device(self, device_idx: int) -> str:
            return f"torch.neuron.set_device({device_idx})"

        def synchronize(self) -> str:
            return "pass"

        def device_guard(self, device_idx: int) -> str:
            return f"torch.neuron.device({device_idx})"

        def cpp_kernel_type(self) -> str:
            return "void*"

        def cpp_device_ptr(self) -> str:
            return "void*"

    return NeuronDeviceOpOverrides()


def _make_wrapper_codegen():
    require("torch_neuronx.compiler._registration._make_wrapper_codegen (overrides private methods of "
            "torch._inductor.codegen.wrapper.PythonWrapperCodegen)", WRAPPER_WRITTEN_FOR)
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen

    fast_alloc = hasattr(__import__("torch_neuronx")._C, "_empty_strided_neuron")

    class _NeuronKernelCalls:
        """Kernels are called like CPU kernels, buffers are allocated on the graph's neuron core: the
        main program's wrapper and a nested compile region's subgraph function (invoke_subgraph) alike."""

        def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, **kwargs):
            if device is not None and device.type == DEVICE:
                device = torch.device("cpu")
            if device is None and not triton:
                current = torch._inductor.virtualized.V.graph.get_current_device_or_throw()
                if current.type == DEVICE:
                    device = torch.device("cpu")
            return super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)

        def make_allocation(self, name, device, dtype, shape, stride, allocation_shape=None, is_pinned=False):
            if device.type != DEVICE:
                return super().make_allocation(name, device, dtype, shape, stride, allocation_shape, is_pinned)
            if allocation_shape is None:
                allocation_shape = shape
            index = device.index if device.index is not None else 0
            size = self.codegen_python_shape_tuple(allocation_shape)
            view = self.codegen_python_shape_tuple(shape)
            strides = self.codegen_python_shape_tuple(stride)
            # Always name the core: the stock line says device='neuron' (the current core).
            if fast_alloc:
                out = f"{name} = empty_strided_neuron({size}, {strides}, {dtype}, {index})"
            else:
                out = f"{name} = empty_strided({size}, {strides}, device='{DEVICE}:{index}', dtype={dtype})"
            if view != size:
                out += f".as_strided({view}, {strides})"
            return out

    class NeuronSubgraphWrapperCodegen(_NeuronKernelCalls, SubgraphPythonWrapperCodegen):
        """A subgraph's function (torch.compiler.nested_compile_region): its header is the parent's."""

    class NeuronWrapperCodegen(_NeuronKernelCalls, PythonWrapperCodegen):
        """Host glue of a compiled graph."""

        @staticmethod
        def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
            if is_subgraph:
                return NeuronSubgraphWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
            return NeuronWrapperCodegen()

        def write_header(self) -> None:
            super().write_header()
            if fast_alloc:
                self.header.writeline("empty_strided_neuron = __import__('torch_neuronx')._C._empty_strided_neuron")

        def generate_after_suffix(self, result) -> None:
            super().generate_after_suffix(result)
            if not fast_alloc:
                return
            from torch._inductor.virtualized import V

            from . import _host_program as host_program

            chosen = host_program.plan(V.graph, result.getvalue())
            if chosen is not None:
                for line in host_program.footer(*chosen):
                    result.writeline(line)

    return NeuronWrapperCodegen


def _make_version_pass():
    from torch._inductor.custom_graph_pass import CustomGraphPass

    from ._version import backend_version

    from ..runtime import host_gemm
    from . import _low_precision_gemm as low_precision_gemm

    class NeuronVersionPass(CustomGraphPass):
        """Post-grad pass of neuron graphs: bf16/fp16 GEMMs accumulate in fp32 where the host GEMM
        policy says so (_low_precision_gemm.py). Its uuid puts our backend version and that policy
        into Inductor's cache keys."""

        def __call__(self, graph) -> None:
            low_precision_gemm.run(graph)

        def uuid(self):
            return f"{backend_version()}-gemm-fp32:{','.join(str(d) for d in host_gemm.fp32_dtypes())}"

    return NeuronVersionPass()


def register() -> None:
    """Idempotently register neuron with Dynamo and Inductor."""
    global _done
    if _done:
        return
    with _lock:
        if _done:
            return
        from torch._dynamo.device_interface import register_interface_for_device
        from torch._inductor.codegen.common import register_backend_for_device, register_device_op_overrides
        from torch._inductor.codegen.cpp import CppScheduling

        from . import _cpu_alike as cpu_alike, _fake_conv as fake_conv, _kernel_libraries as kernel_libraries, _rng_hops as rng_hops, _vec_isa as vec_isa

        interface = _make_device_interface()
        register_interface_for_device(DEVICE, interface)
        for i in range(max(1, torch.neuron.device_count())):
            register_interface_for_device(f"{DEVICE}:{i}", interface)
        register_device_op_overrides(DEVICE, _make_op_overrides())
        register_backend_for_device(
            DEVICE, CppScheduling, _make_wrapper_codegen(), device_custom_pass=_make_version_pass()
        )
        cpu_alike.apply()
        rng_hops.register()
        fake_conv.install()  # fake conv strides on neuron = eager (CPU kernel) strides
        vec_isa.install()  # skip re-loading ISA test libraries a process already loaded
        kernel_libraries.install()  # a cut-short kernel library raises ImportError (and is rebuilt), not SIGBUS
        _done = True


def is_registered() -> bool:
    return _done
