// Compiled graphs as host programs: the program Inductor generates for neuron is its CPU
// program (torch_neuronx/compiler/_host_program.py decides which), so it can run on host views of the
// device memory from its first line to its last, instead of crossing the neuron/host bridge at
// every extern kernel (aliases of each operand, device checks, op scopes, adopting each result).
//
// Why: between two extern calls of a decode step the GEMV streams megabytes of weights through
// the host's L2, so every cache line the bridge touches is fetched again on each call. Callgrind
// with a 1 MiB L2 model counted ~900 more L2 misses per compiled decode step than Inductor on CPU,
// nearly all in the per-extern bridge (docs/compile.md); here the bridge is crossed twice per call: the inputs
// become CPU aliases of their neuron storages before the program runs (kept from call to call for
// inputs such as weights, see InputSlot), and the outputs become neuron tensors over the same bytes
// after it.
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
#include <c10/core/InferenceMode.h>
#include <c10/util/SmallVector.h>

#include <array>
#include <cstring>
#include <memory>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/object_ptr.h>

namespace torch_neuronx {
namespace {

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

// Input aliases kept from call to call, one slot per argument position: a decode step passes the
// same weights every call, and a fresh alias (TensorImpl, StorageImpl, Python object, and their
// frees) per input per call was ~1.5k instructions each (callgrind), the largest part of what a
// host program still added over Inductor on CPU. A cached alias does not own the neuron bytes
// (a cache must not keep device memory alive): a call borrows it only for an input that something
// besides the argument list holds (a parameter, the caller's tensor), keeps that input's storage
// alive until the program returns, and trusts nothing but content (unowned_alias_matches). After
// the call an alias that anything still references takes a reference to the neuron storage, as
// every alias did before, and leaves the cache; so does one whose storage the program re-pointed.
struct InputSlot {
  PyObject* alias = nullptr;   // only this slot references it; untracked by the GC while here
  bool inference = false;      // made under inference mode (an inference tensor)
};
constexpr const char* kSlotsName = "torch_neuronx.host_program_inputs";
using InputSlots = std::vector<InputSlot>;

void free_input_slots(PyObject* capsule) {
  auto* slots = static_cast<InputSlots*>(PyCapsule_GetPointer(capsule, kSlotsName));
  for (InputSlot& slot : *slots) Py_XDECREF(slot.alias);
  delete slots;
}

// The aliases one call borrowed, returned to their slots (or released) when the call ends,
// normally or by an exception.
class Loans {
 public:
  Loans(InputSlots& slots, bool inference) : slots_(slots), inference_(inference) {}
  Loans(const Loans&) = delete;
  Loans& operator=(const Loans&) = delete;
  ~Loans() {
    if (loans_.empty()) return;
    PyObject *type, *value, *traceback;   // an exception may be on its way out
    PyErr_Fetch(&type, &value, &traceback);
    for (Loan& loan : loans_) settle(loan);
    PyErr_Restore(type, value, traceback);
  }

  // A new reference to a CPU alias of input `index` (`t`, over `neuron`), cached or made.
  PyObject* borrow(Py_ssize_t index, const at::Tensor& t, c10::StorageImpl* neuron) {
    if (static_cast<size_t>(index) >= slots_.size()) slots_.resize(index + 1);
    InputSlot& slot = slots_[index];
    PyObject* alias = slot.alias;
    slot.alias = nullptr;
    if (alias != nullptr && !reusable(alias, slot.inference, t, neuron)) Py_CLEAR(alias);
    if (alias != nullptr) {
      if (!PyObject_GC_IsTracked(alias)) PyObject_GC_Track(alias);
    } else {
      alias = THPVariable_Wrap(cpu_alias(t, make_unowned_alias_storage(neuron)));
      if (alias == nullptr) throw python_error();
    }
    loans_.push_back({index, alias, c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(neuron))});
    Py_INCREF(alias);   // one for the loan, one for the argument list
    return alias;
  }

  // For the outputs: an output over a borrowed alias's storage is a view of that input.
  void add_to(StorageMap& outputs) const {
    for (const Loan& loan : loans_) outputs.entries.emplace_back(storage_of(loan.alias), loan.neuron);
  }

 private:
  struct Loan {
    Py_ssize_t index;
    PyObject* alias;        // the loan's reference
    c10::Storage neuron;    // the input's storage: alive until the program has returned
  };

  static c10::StorageImpl* storage_of(PyObject* alias) {
    return THPVariable_Unpack(alias).unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
  }

  bool reusable(PyObject* alias, bool made_inference, const at::Tensor& t, c10::StorageImpl* neuron) const {
    if (Py_REFCNT(alias) != 1 || made_inference != inference_) return false;
    const at::Tensor& a = THPVariable_Unpack(alias);
    const c10::TensorImpl* impl = a.unsafeGetTensorImpl();
    return a.use_count() == 1 && impl->unsafe_storage().use_count() == 1 && impl->autograd_meta() == nullptr &&
           unowned_alias_matches(a, t, neuron);
  }

  void settle(Loan& loan) {
    const at::Tensor& a = THPVariable_Unpack(loan.alias);
    c10::StorageImpl* s = storage_of(loan.alias);
    c10::StorageImpl* n = loan.neuron.unsafeGetStorageImpl();
    const bool unowned = s->data_ptr().get_context() == nullptr && s->data_ptr().get() == n->data_ptr().get();
    const bool held = Py_REFCNT(loan.alias) > 1 || a.use_count() > 1 || a.weak_use_count() > 1 ||
                      c10::raw::intrusive_ptr::use_count(s) > 1 || c10::raw::weak_intrusive_ptr::use_count(s) > 1;
    if (held && unowned) own_aliased_bytes(s, n);
    InputSlot& slot = slots_[loan.index];
    if (!held && unowned && slot.alias == nullptr) {
      PyObject_GC_UnTrack(loan.alias);   // out of gc.get_objects(): nobody else may reach it
      slot.alias = loan.alias;
      slot.inference = inference_;
    } else {
      Py_DECREF(loan.alias);
    }
    loan.neuron = c10::Storage();
  }

  InputSlots& slots_;
  bool inference_;
  c10::SmallVector<Loan, 8> loans_;
};

// An input no cached alias serves: an owning alias (the neuron bytes live as long as it), which
// shares its storage with the other inputs over the same neuron storage.
at::Tensor owning_alias(const at::Tensor& t, StorageMap& seen) {
  c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  if (const c10::Storage* known = seen.find(impl)) return cpu_alias(t, *known);
  at::Tensor alias = cpu_alias(t);
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

// The program's results: outputs it returns as neuron tensors become neuron tensors over the same
// bytes (a tuple is rebuilt, a list changed in place).
PyObject* outputs_to_neuron(THPObjectPtr result, c10::DeviceIndex core, PyObject* neuron_outputs,
                            StorageMap& seen) {
  const bool is_tuple = PyTuple_Check(result.get());
  if (!is_tuple && !PyList_Check(result.get())) return result.release();
  const Py_ssize_t n = is_tuple ? PyTuple_GET_SIZE(result.get()) : PyList_GET_SIZE(result.get());
  THPObjectPtr outputs(is_tuple ? PyTuple_New(n) : nullptr);
  if (is_tuple && !outputs) throw python_error();
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
  return is_tuple ? outputs.release() : result.release();   // `result`'s tuple and its CPU outputs go here
}

// self: (program, core, neuron_outputs, input slots) where neuron_outputs[i] says output i is a
// neuron tensor.
PyObject* run_host_program(PyObject* self, PyObject* args) {
  HANDLE_TH_ERRORS
  PyObject* program = PyTuple_GET_ITEM(self, 0);
  const auto core = static_cast<c10::DeviceIndex>(PyLong_AsLong(PyTuple_GET_ITEM(self, 1)));
  PyObject* neuron_outputs = PyTuple_GET_ITEM(self, 2);
  auto* slots = static_cast<InputSlots*>(PyCapsule_GetPointer(PyTuple_GET_ITEM(self, 3), kSlotsName));
  TORCH_CHECK_TYPE(PyList_Check(args), "a compiled neuron graph takes its inputs as one list, got ",
                   Py_TYPE(args)->tp_name);
  Loans loans(*slots, c10::InferenceMode::is_enabled());   // settled after the outputs are converted
  {
    StorageMap seen;
    const Py_ssize_t n = PyList_GET_SIZE(args);
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item = PyList_GET_ITEM(args, i);
      if (!THPVariable_Check(item)) continue;
      const at::Tensor& t = THPVariable_Unpack(item);
      if (!t.defined() || !t.is_privateuseone()) continue;
      c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
      PyObject* alias;
      if (Py_REFCNT(item) > 1 && seen.find(impl) == nullptr) {   // held outside the list: a cached alias
        alias = loans.borrow(i, t, impl);
        seen.entries.emplace_back(impl, THPVariable_Unpack(alias).storage());
      } else {   // only the list holds it: the program's args.clear() may free it early, as on CPU
        alias = THPVariable_Wrap(owning_alias(t, seen));
        if (alias == nullptr) throw python_error();
      }
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
  StorageMap seen;
  loans.add_to(seen);
  return outputs_to_neuron(std::move(result), core, neuron_outputs, seen);
  END_HANDLE_TH_ERRORS
}

PyMethodDef run_def = {"neuron_host_program", reinterpret_cast<PyCFunction>(&run_host_program), METH_O,
                       "A compiled neuron graph run as a host program (torch_neuronx._C._host_program)."};

// _host_program(program, core, neuron_outputs): `program` (Inductor's call(args)) as a host program.
PyObject* host_program(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_TYPE(nargs == 3, "_host_program(program, core, neuron_outputs) takes 3 arguments, got ", nargs);
  TORCH_CHECK_TYPE(PyCallable_Check(args[0]), "_host_program: program must be callable (Inductor's call(args)), got ",
                   Py_TYPE(args[0])->tp_name);
  const long core = PyLong_AsLong(args[1]);
  if (core == -1 && PyErr_Occurred()) throw python_error();
  check_device(static_cast<c10::DeviceIndex>(core));
  TORCH_CHECK_TYPE(PyTuple_Check(args[2]), "_host_program: neuron_outputs must be a tuple of bools (one per output: "
                   "True for a neuron tensor), got ", Py_TYPE(args[2])->tp_name);
  auto owned_slots = std::make_unique<InputSlots>();
  THPObjectPtr slots(PyCapsule_New(owned_slots.get(), kSlotsName, &free_input_slots));
  if (!slots) throw python_error();
  owned_slots.release();   // the capsule frees it
  PyObject* state = PyTuple_Pack(4, args[0], args[1], args[2], slots.get());
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
  static std::array<HostBlockAllocator, kMaxNeuronCores> allocators = [] {
    std::array<HostBlockAllocator, kMaxNeuronCores> a;
    for (size_t i = 0; i < a.size(); ++i) a[i].core_ = static_cast<c10::DeviceIndex>(i);
    return a;
  }();
  TORCH_CHECK(core < kMaxNeuronCores, "neuron:", int(core), " is beyond the ", kMaxNeuronCores,
              " cores a compiled host program can use");
  TORCH_CHECK(size.size() == stride.size(), "size ", size, " and stride ", stride, " differ in length");
  return at::detail::empty_strided_generic(size, stride, &allocators[core],
                                           c10::DispatchKeySet(c10::DispatchKey::CPU), dtype);
}

PyMethodDef host_program_def = {
    "_host_program", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&host_program)), METH_FASTCALL,
    "Run a compiled graph's program on host views of its neuron inputs: (program, core, neuron_outputs)."};

}  // namespace torch_neuronx
