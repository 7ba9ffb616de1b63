// Compiled graphs as host programs: the program Inductor generates for neuron is its CPU
// program (torch_neuronx/compiler/host_program.py decides which), so it can run on host views of the
// device memory from its first line to its last, instead of crossing the neuron/host bridge at
// every extern kernel (aliases of each operand, device checks, op scopes, adopting each result).
//
// Why: between two extern calls of a decode step the GEMV streams megabytes of weights through
// the host's L2, so every cache line the bridge touches is fetched again on each call. Callgrind
// with a 1 MiB L2 model counted ~900 more L2 misses per compiled decode step than Inductor on CPU,
// nearly all in the per-extern bridge (docs/compile.md); here the bridge is crossed twice per call: the inputs
// become CPU aliases of their neuron storages (which they keep alive) before the program runs,
// and the outputs become neuron tensors over the same bytes after it.
//
// Memory stays device memory: buffers are counted blocks of the graph's core (allocate_host_block);
// what the program's CPU kernels allocate (extern results, their scratch) comes from the core
// through the host-kernel allocator while the program runs, as for an eager op, and a result the
// graph returns is counted when adopted. The program counts as one op of its core (busy time,
// neuron-top).
#include "neuron_core.h"
#include "tools_core.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/SmallVector.h>

#include <array>
#include <cstring>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/object_ptr.h>

namespace torch_neuronx {
namespace {

constexpr int kMaxHostProgramCores = 128;  // the allocator's device limit

// One neuron storage, one host storage per call: inputs that are views of one storage stay
// views of one storage (overlap checks of the CPU kernels see what they see on CPU).
struct StorageMap {
  c10::SmallVector<std::pair<c10::StorageImpl*, c10::Storage>, 8> entries;
  const c10::Storage* find(c10::StorageImpl* key) const {
    for (const auto& e : entries) {
      if (e.first == key) return &e.second;
    }
    return nullptr;
  }
};

at::Tensor to_host(const at::Tensor& t, StorageMap& seen) {
  c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  if (const c10::Storage* known = seen.find(impl)) return cpu_alias(t, *known);
  at::Tensor alias = cpu_alias(t);   // owning: the neuron bytes live as long as the alias
  seen.entries.emplace_back(impl, alias.storage());
  return alias;
}

at::Tensor to_neuron(const at::Tensor& t, c10::DeviceIndex core, StorageMap& seen) {
  c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  if (const c10::Storage* known = seen.find(impl)) return neuron_view(*known, t);
  c10::Storage storage;
  at::Tensor out;
  if (c10::StorageImpl* owner = aliased_neuron_storage(impl)) {   // an input, or a view of one
    storage = c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(owner));
    out = neuron_view(storage, t);
  } else {                                                          // a buffer or a kernel's result
    out = adopt_host_result(t, core);
    storage = out.storage();
  }
  seen.entries.emplace_back(impl, std::move(storage));
  return out;
}

// self: (program, core, neuron_outputs) where neuron_outputs[i] says output i is a neuron tensor.
PyObject* run_host_program(PyObject* self, PyObject* args) {
  HANDLE_TH_ERRORS
  PyObject* program = PyTuple_GET_ITEM(self, 0);
  const auto core = static_cast<c10::DeviceIndex>(PyLong_AsLong(PyTuple_GET_ITEM(self, 1)));
  PyObject* neuron_outputs = PyTuple_GET_ITEM(self, 2);
  TORCH_CHECK_TYPE(PyList_Check(args), "a compiled neuron graph takes its inputs as one list, got ",
                   Py_TYPE(args)->tp_name);
  {
    StorageMap seen;
    const Py_ssize_t n = PyList_GET_SIZE(args);
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item = PyList_GET_ITEM(args, i);
      if (!THPVariable_Check(item)) continue;
      const at::Tensor& t = THPVariable_Unpack(item);
      if (!t.defined() || !t.is_privateuseone()) continue;
      PyObject* alias = THPVariable_Wrap(to_host(t, seen));
      if (alias == nullptr) throw python_error();
      PyList_SET_ITEM(args, i, alias);   // the list held `item`: the program's own args.clear() frees it
      Py_DECREF(item);
    }
  }
  THPObjectPtr result;
  {
    OpScope scope(nullptr, core);   // the host-kernel allocator serves this core while it runs
    result = THPObjectPtr(PyObject_CallOneArg(program, args));
  }
  if (!result) throw python_error();
  const bool is_tuple = PyTuple_Check(result.get());
  if (!is_tuple && !PyList_Check(result.get())) return result.release();
  const Py_ssize_t n = is_tuple ? PyTuple_GET_SIZE(result.get()) : PyList_GET_SIZE(result.get());
  THPObjectPtr outputs(is_tuple ? PyTuple_New(n) : nullptr);   // a tuple is rebuilt, a list changed in place
  if (is_tuple && !outputs) throw python_error();
  StorageMap seen;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = is_tuple ? PyTuple_GET_ITEM(result.get(), i) : PyList_GET_ITEM(result.get(), i);
    THPObjectPtr converted(item);
    Py_INCREF(item);
    const bool neuron = i < PyTuple_GET_SIZE(neuron_outputs) && PyTuple_GET_ITEM(neuron_outputs, i) == Py_True;
    if (neuron && THPVariable_Check(item)) {
      const at::Tensor& t = THPVariable_Unpack(item);
      if (t.defined() && t.is_cpu()) {
        at::Tensor out = to_neuron(t, core, seen);
        if (!out.is_same(t)) {   // else adopted in place: the same Python object, now a neuron tensor
          converted = THPObjectPtr(THPVariable_Wrap(std::move(out)));
          if (!converted) throw python_error();
        }
      }
    }
    if (is_tuple) {
      PyTuple_SET_ITEM(outputs.get(), i, converted.release());
    } else {
      PyList_SET_ITEM(result.get(), i, converted.release());
      Py_DECREF(item);
    }
  }
  return is_tuple ? outputs.release() : result.release();
  END_HANDLE_TH_ERRORS
}

PyMethodDef run_def = {"neuron_host_program", reinterpret_cast<PyCFunction>(&run_host_program), METH_O,
                       "A compiled neuron graph run as a host program (torch_neuronx._C._host_program)."};

// _host_program(program, core, neuron_outputs): `program` (Inductor's call(args)) as a host program.
PyObject* host_program(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_TYPE(nargs == 3, "_host_program(program, core, neuron_outputs) takes 3 arguments, got ", nargs);
  TORCH_CHECK_TYPE(PyCallable_Check(args[0]), "program must be callable");
  const long core = PyLong_AsLong(args[1]);
  if (core == -1 && PyErr_Occurred()) throw python_error();
  check_device(static_cast<c10::DeviceIndex>(core));
  TORCH_CHECK_TYPE(PyTuple_Check(args[2]), "neuron_outputs must be a tuple of bools");
  PyObject* state = PyTuple_Pack(3, args[0], args[1], args[2]);
  if (state == nullptr) throw python_error();
  PyObject* fn = PyCFunction_New(&run_def, state);
  Py_DECREF(state);
  return fn;
  END_HANDLE_TH_ERRORS
}

}  // namespace

// The allocator of a host program's buffers on one core: counted blocks of that core as CPU memory.
// The buffers are then made by ATen's own empty_strided_generic, as empty_strided_cpu makes CPU's.
class HostBlockAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override { return allocate_host_block(core_, nbytes); }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
  c10::DeviceIndex core_ = 0;
};

// A host program's buffer: a CPU tensor over a counted block of `core`.
at::Tensor empty_strided_host(c10::IntArrayRef size, c10::IntArrayRef stride, at::ScalarType dtype,
                              c10::DeviceIndex core) {
  check_device(core);
  static std::array<HostBlockAllocator, kMaxHostProgramCores> allocators = [] {
    std::array<HostBlockAllocator, kMaxHostProgramCores> a;
    for (size_t i = 0; i < a.size(); ++i) a[i].core_ = static_cast<c10::DeviceIndex>(i);
    return a;
  }();
  TORCH_CHECK(core < kMaxHostProgramCores, "neuron:", int(core), " is beyond the ", kMaxHostProgramCores,
              " cores a compiled host program can use");
  TORCH_CHECK(size.size() == stride.size(), "size ", size, " and stride ", stride, " differ in length");
  return at::detail::empty_strided_generic(size, stride, &allocators[core],
                                           c10::DispatchKeySet(c10::DispatchKey::CPU), dtype);
}

PyMethodDef host_program_def = {
    "_host_program", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&host_program)), METH_FASTCALL,
    "Run a compiled graph's program on host views of its neuron inputs: (program, core, neuron_outputs)."};

}  // namespace torch_neuronx
