// torch_neuronx._C: the small Python surface of the C++ core.
#include "neuron_core.h"

#include <c10/util/SmallVector.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

namespace torch_neuronx {
void bind_tools(py::module& m);  // tools_bindings.cpp
extern PyMethodDef host_program_def;  // host_program.cpp
at::Tensor empty_strided_host(c10::IntArrayRef size, c10::IntArrayRef stride, at::ScalarType dtype,
                              c10::DeviceIndex core);
void bind_numerics_filter(py::module& m);  // numerics_filter.cpp
void set_low_precision_gemm_fp32(bool bf16, bool fp16);  // kernels_matmul.cpp
std::pair<bool, bool> low_precision_gemm_fp32();         // kernels_matmul.cpp
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

// A shape tuple (or list) of Python ints, read without pybind11's list caster.
void parse_shape(PyObject* seq, const char* what, c10::SmallVector<int64_t, 8>& out) {
  PyObject* fast = PySequence_Fast(seq, what);
  if (fast == nullptr) throw python_error();
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  PyObject** items = PySequence_Fast_ITEMS(fast);
  out.resize(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    out[i] = PyLong_AsLongLong(items[i]);
    if (out[i] == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      throw python_error();
    }
  }
  Py_DECREF(fast);
}

// The two buffer allocators of compiled graphs, several calls per graph call: raw METH_FASTCALL
// functions, as torch's _empty_strided_cpu is. The pybind11 binding they replace spent ~3k
// instructions per call converting the two shape tuples (callgrind, decode step of
// benchmarks/compile_decoder.py), more than the allocation. Arguments: (size, stride, dtype, index).
template <at::Tensor (*Allocate)(c10::IntArrayRef, c10::IntArrayRef, at::ScalarType, c10::DeviceIndex)>
PyObject* empty_strided_fast(const char* name, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_TYPE(nargs == 4, name, "(size, stride, dtype, index) takes 4 arguments, got ", nargs);
  TORCH_CHECK_TYPE(THPDtype_Check(args[2]), "dtype must be a torch.dtype");
  c10::SmallVector<int64_t, 8> size, stride;
  parse_shape(args[0], "size must be a sequence of ints", size);
  parse_shape(args[1], "stride must be a sequence of ints", stride);
  const long long index = PyLong_AsLongLong(args[3]);
  if (index == -1 && PyErr_Occurred()) throw python_error();
  const auto scalar_type = reinterpret_cast<THPDtype*>(args[2])->scalar_type;
  return THPVariable_Wrap(Allocate(size, stride, scalar_type, static_cast<c10::DeviceIndex>(index)));
  END_HANDLE_TH_ERRORS
}

// _empty_strided_neuron: a neuron program's buffer.
PyObject* empty_strided_neuron(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  return empty_strided_fast<&empty_strided_on>("_empty_strided_neuron", args, nargs);
}

// _empty_strided_host(size, stride, dtype, index): a compiled host program's buffer (host_program.cpp).
PyObject* empty_strided_host_fast(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  return empty_strided_fast<&empty_strided_host>("_empty_strided_host", args, nargs);
}

PyMethodDef empty_strided_host_def = {
    "_empty_strided_host", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&empty_strided_host_fast)),
    METH_FASTCALL, "A compiled host program's buffer: a CPU tensor over a counted block of core `index`."};

PyMethodDef empty_strided_neuron_def = {
    "_empty_strided_neuron", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&empty_strided_neuron)),
    METH_FASTCALL, "Allocate an uninitialised neuron tensor (compiled graphs' buffers): (size, stride, dtype, index)."};

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
  m.def("_set_low_precision_gemm_fp32", &tn::set_low_precision_gemm_fp32, py::arg("bf16"), py::arg("fp16"),
        "bf16 / fp16 matmuls accumulate in fp32 (runtime/host_gemm.py sets it).");
  m.def("_low_precision_gemm_fp32", &tn::low_precision_gemm_fp32);
  m.def("_cpu_alias", [](const at::Tensor& t) { return tn::cpu_alias(t); },
        "A CPU tensor over the same bytes as a neuron tensor (no copy).");
  m.add_object("_empty_strided_neuron",
               py::reinterpret_steal<py::object>(PyCFunction_New(&tn::empty_strided_neuron_def, nullptr)));
  m.add_object("_empty_strided_host",
               py::reinterpret_steal<py::object>(PyCFunction_New(&tn::empty_strided_host_def, nullptr)));
  m.add_object("_host_program", py::reinterpret_steal<py::object>(PyCFunction_New(&tn::host_program_def, nullptr)));
  tn::bind_tools(m);
  tn::bind_numerics_filter(m);
  m.def("_drain_autograd_workers", &tn::drain_autograd_workers,
        py::call_guard<py::gil_scoped_release>());
}
