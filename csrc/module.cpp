// torch_neuronx._C: the small Python surface of the C++ core.
#include "neuron_core.h"

#include <torch/csrc/Dtype.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

namespace torch_neuronx {
void bind_tools(py::module& m);  // tools_bindings.cpp
void bind_numerics_filter(py::module& m);  // numerics_filter.cpp
namespace {

void configure(std::vector<int64_t> capacities, int64_t default_device, std::string error) {
  RuntimeConfig config;
  config.hbm_capacity_bytes = std::move(capacities);
  config.default_device = static_cast<c10::DeviceIndex>(default_device);
  config.error = std::move(error);
  configure_runtime(std::move(config));
}

py::object default_generator_object(int64_t index) {
  const at::Generator& gen = default_generator(static_cast<c10::DeviceIndex>(index));
  return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(gen));
}

}  // namespace
}  // namespace torch_neuronx

PYBIND11_MODULE(_C, m) {
  namespace tn = torch_neuronx;
  m.doc() = "torch-neuronx C++ core (allocator, guard, hooks, generator, fallback, autocast)";
  m.def("_configure", &tn::configure, "Hand the virtual topology to the core.");
  m.def("_device_count", [] { return static_cast<int64_t>(tn::device_count()); });
  m.def("_check_device", [](int64_t i) { tn::check_device(static_cast<c10::DeviceIndex>(i)); });
  m.def("_current_device", [] { return static_cast<int64_t>(tn::current_device()); });
  m.def("_set_device", [](int64_t i) { tn::set_current_device(static_cast<c10::DeviceIndex>(i)); });
  m.def("_hbm_capacity", [](int64_t i) { return tn::hbm_capacity(static_cast<c10::DeviceIndex>(i)); });
  m.def("_is_initialized", &tn::is_initialized);
  m.def("_mark_initialized", &tn::mark_initialized);
  m.def("_is_in_bad_fork", &tn::in_bad_fork);
  m.def("_neuron_thread_ids", &tn::neuron_thread_ids,
        "Native ids of the threads that ran neuron work (exit_guard stops the daemon ones at exit).");
  m.def("_get_default_generator", &tn::default_generator_object);
  m.def("_register_routed_ops", &tn::register_routed_ops);
  m.def("_routed_ops", &tn::routed_op_names);
  m.def("_host_kernel_calls", &tn::host_kernel_calls);
  m.def("_cpu_alias", [](const at::Tensor& t) { return tn::cpu_alias(t); },
        "A CPU tensor over the same bytes as a neuron tensor (no copy).");
  m.def(
      "_empty_strided_neuron",
      [](std::vector<int64_t> size, std::vector<int64_t> stride, py::object dtype, int64_t index) {
        TORCH_CHECK(THPDtype_Check(dtype.ptr()), "dtype must be a torch.dtype");
        const auto scalar_type = reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type;
        return tn::empty_strided_on(size, stride, scalar_type, static_cast<c10::DeviceIndex>(index));
      },
      "Allocate an uninitialised neuron tensor (compiled graphs' buffers).");
  tn::bind_tools(m);
  tn::bind_numerics_filter(m);
  m.def("_drain_autograd_workers", &tn::drain_autograd_workers,
        py::call_guard<py::gil_scoped_release>());
}
