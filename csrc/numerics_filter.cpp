// The numerics pre-filter: TORCH_NEURONX_NUMERICS=check|trainium without
// entering Python for ops that cannot differ on Trainium.
//
// The numerics layer (torch_neuronx/numerics/) checks or emulates ops whose
// tensors have a dtype Trainium computes differently (int64/uint64, float64,
// fp8, integers through fp32; fp16/bf16 under stochastic rounding). As a Python
// dispatch mode it sees every op, and entering Python alone costs ~1.9x on a
// float32 transformer block. This filter is a boxed fallback at the same place
// in the dispatch order, the Fake key just below Python (reserved for a C++
// FakeTensor, unused by torch 2.13: when a torch registers its own fallback
// there, enable() says no and the Python mode is used instead). It hands an op
// to Python only when a neuron tensor argument or a dtype argument has a
// watched dtype (NumericsMode.dispatch), or when the op's single result is a
// watched neuron tensor (NumericsMode.produced). Those conditions are a
// superset of the Python mode's own fast-path test, and the Python side then
// decides exactly as the mode did, so the reports are the same.
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/PyInterpreter.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/tensor_memoryformats.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/library.h>

#include <array>
#include <atomic>

namespace torch_neuronx {
namespace {

constexpr c10::DispatchKey kFilterKey = c10::DispatchKey::Fake;
constexpr size_t kNumScalarTypes = static_cast<size_t>(c10::ScalarType::NumOptions);

// Set and cleared from Python with the GIL held (install at startup; benchmarks).
PyObject* g_dispatch = nullptr;  // NumericsMode.dispatch(func, args, kwargs) -> result
PyObject* g_produced = nullptr;  // NumericsMode.produced(func, args, kwargs, out)
std::array<bool, kNumScalarTypes> g_watch{};
torch::Library* g_library = nullptr;
std::atomic<int64_t> g_python_calls{0};  // ops handed to Python (tests, benchmark)

bool watched(int64_t type) { return type >= 0 && type < int64_t(kNumScalarTypes) && g_watch[type]; }

bool watched_neuron(const at::Tensor& t) {
  return t.defined() && t.is_privateuseone() && watched(static_cast<int64_t>(t.scalar_type()));
}

c10::TypeKind element_kind(const c10::Argument& arg) {
  const auto& type = arg.real_type();
  if (type->kind() == c10::TypeKind::OptionalType) {
    return type->castRaw<c10::OptionalType>()->getElementType()->kind();
  }
  return type->kind();
}

// True whenever NumericsMode._inputs_watched could be: a neuron tensor (alone
// or in a list) or a ScalarType argument of a watched dtype. The mode looks at
// kwargs["dtype"] only; every ScalarType argument here is a harmless superset.
bool inputs_may_be_watched(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = args[i];
    if (v.isTensor()) {
      if (watched_neuron(v.toTensor())) return true;
    } else if (v.isInt()) {
      if (element_kind(schema.arguments()[i]) == c10::TypeKind::ScalarTypeType && watched(v.toInt())) {
        return true;
      }
    } else if (v.isList() && !v.isIntList() && !v.isDoubleList() && !v.isBoolList()) {
      for (const c10::IValue& item : v.toListRef()) {
        if (item.isTensor() && watched_neuron(item.toTensor())) return true;
      }
    }
  }
  return false;
}

// ---- the hand-over to Python ---------------------------------------------
// Arguments as a TorchDispatchMode receives them (PyTorch's Python fallback
// builds them the same way): trailing defaulted positionals dropped,
// keyword-only arguments in kwargs unless defaulted, enums as torch objects.
py::object argument_to_py(const c10::Argument& arg, const c10::IValue& v) {
  if (v.isNone()) return py::none();
  switch (element_kind(arg)) {
    case c10::TypeKind::ScalarTypeType:
      return py::reinterpret_borrow<py::object>(
          reinterpret_cast<PyObject*>(torch::getTHPDtype(static_cast<c10::ScalarType>(v.toInt()))));
    case c10::TypeKind::LayoutType:
      return py::reinterpret_borrow<py::object>(
          reinterpret_cast<PyObject*>(torch::getTHPLayout(static_cast<c10::Layout>(v.toInt()))));
    case c10::TypeKind::MemoryFormatType:
      return py::reinterpret_borrow<py::object>(
          torch::utils::getTHPMemoryFormat(static_cast<c10::MemoryFormat>(v.toInt())));
    default:
      return torch::jit::toPyObject(v);
  }
}

bool is_default(const c10::Argument& arg, const c10::IValue& v) {
  if (!arg.default_value().has_value() || v.isTensor()) return false;
  return *arg.default_value() == v;
}

std::pair<py::tuple, py::dict> to_python(const c10::FunctionSchema& schema,
                                         c10::ArrayRef<c10::IValue> values) {
  const auto& args = schema.arguments();
  size_t kwarg_start = values.size();
  while (kwarg_start > 0 && args[kwarg_start - 1].kwarg_only()) --kwarg_start;
  size_t positional_end = kwarg_start;
  while (positional_end > 0 && is_default(args[positional_end - 1], values[positional_end - 1])) {
    --positional_end;
  }
  py::tuple py_args(positional_end);
  for (size_t i = 0; i < positional_end; ++i) py_args[i] = argument_to_py(args[i], values[i]);
  py::dict kwargs;
  for (size_t i = kwarg_start; i < values.size(); ++i) {
    if (is_default(args[i], values[i])) continue;
    kwargs[py::str(args[i].name())] = argument_to_py(args[i], values[i]);
  }
  return {std::move(py_args), std::move(kwargs)};
}

void push_returns(const c10::FunctionSchema& schema, torch::jit::Stack* stack, const py::object& out) {
  const auto& returns = schema.returns();
  if (returns.empty()) {
    TORCH_CHECK(out.is_none(), schema.name(), ": the numerics layer returned a value for an op without one");
  } else if (returns.size() == 1) {
    stack->push_back(torch::jit::toIValue(out, returns[0].real_type()));
  } else {
    auto outs = py::cast<py::sequence>(out);
    TORCH_CHECK(outs.size() == returns.size(), schema.name(), ": the numerics layer returned ",
                outs.size(), " values, the op has ", returns.size());
    for (size_t i = 0; i < returns.size(); ++i) {
      stack->push_back(torch::jit::toIValue(outs[i], returns[i].real_type()));
    }
  }
}

[[noreturn]] void raise_python_error() {
  python_error err;
  err.persist();  // the op may be running on an autograd worker thread
  throw err;
}

// The Python side runs the op itself, from the top of the dispatcher: the
// filter stays out of that call and of every op the checks run (as a Python
// mode is popped while its __torch_dispatch__ runs).
void hand_over(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t n) {
  c10::impl::ExcludeDispatchKeyGuard off(kFilterKey);
  py::gil_scoped_acquire gil;
  auto handler = py::reinterpret_borrow<py::object>(g_dispatch);
  auto [args, kwargs] = to_python(op.schema(), torch::jit::last(*stack, n));
  torch::jit::drop(*stack, n);
  py::handle func = torch::detail::getTorchApiFunction(op);
  PyObject* out = PyObject_CallFunctionObjArgs(handler.ptr(), func.ptr(), args.ptr(), kwargs.ptr(), nullptr);
  if (out == nullptr) raise_python_error();
  push_returns(op.schema(), stack, py::reinterpret_steal<py::object>(out));
}

void report_produced(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> values, const c10::IValue& out) {
  c10::impl::ExcludeDispatchKeyGuard off(kFilterKey);
  py::gil_scoped_acquire gil;
  auto handler = py::reinterpret_borrow<py::object>(g_produced);
  auto [args, kwargs] = to_python(op.schema(), values);
  py::handle func = torch::detail::getTorchApiFunction(op);
  py::object result = torch::jit::toPyObject(out);
  PyObject* ret = PyObject_CallFunctionObjArgs(handler.ptr(), func.ptr(), args.ptr(), kwargs.ptr(),
                                               result.ptr(), nullptr);
  if (ret == nullptr) raise_python_error();
  Py_DECREF(ret);  // the result tensor itself, checked or emulated in place
}

void numerics_filter(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const auto below = ks & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kFilterKey);
  // torch.utils._mode_utils.no_dispatch() turns Python modes off; it turns this one off too.
  if (g_dispatch == nullptr || c10::impl::tls_is_dispatch_key_excluded(c10::DispatchKey::Python)) {
    op.redispatchBoxed(below, stack);
    return;
  }
  const auto& schema = op.schema();
  const size_t n = schema.arguments().size();
  if (inputs_may_be_watched(schema, torch::jit::last(*stack, n))) {
    g_python_calls.fetch_add(1, std::memory_order_relaxed);
    hand_over(op, stack, n);
    return;
  }
  // Kept for the result check: factories and ops such as argmax make a watched dtype from others.
  c10::SmallVector<c10::IValue, 8> values(stack->end() - n, stack->end());
  {
    c10::impl::ExcludeDispatchKeyGuard off(kFilterKey);  // the op's inner ops stay unseen, as under the mode
    op.redispatchBoxed(below, stack);
  }
  if (schema.returns().size() == 1 && stack->back().isTensor() && watched_neuron(stack->back().toTensor())) {
    g_python_calls.fetch_add(1, std::memory_order_relaxed);
    report_produced(op, values, stack->back());
  }
}

bool register_filter() {
  if (g_library != nullptr) return true;
  if (c10::Dispatcher::singleton().hasBackendFallbackForDispatchKey(kFilterKey)) return false;
  g_library = new torch::Library(torch::Library::IMPL, "_", kFilterKey, __FILE__, __LINE__);
  g_library->fallback(torch::CppFunction::makeFromBoxedFunction<&numerics_filter>());
  return true;
}

// Start filtering this thread's ops (and the autograd threads it starts, which
// inherit its dispatch keys, as they inherit Python modes). False: the key is
// taken by this torch; the caller pushes the Python mode instead.
bool enable(py::object dispatch, py::object produced, const std::vector<py::object>& dtypes) {
  std::array<bool, kNumScalarTypes> watch{};
  for (const py::object& d : dtypes) {
    TORCH_CHECK(THPDtype_Check(d.ptr()), "_numerics_filter_enable: dtypes must be torch.dtype objects, got ",
                py::str(py::type::handle_of(d)).cast<std::string>());
    watch[static_cast<size_t>(reinterpret_cast<THPDtype*>(d.ptr())->scalar_type)] = true;
  }
  if (!register_filter()) return false;
  Py_XDECREF(g_dispatch);
  Py_XDECREF(g_produced);
  g_dispatch = dispatch.release().ptr();
  g_produced = produced.release().ptr();
  g_watch = watch;
  c10::impl::tls_set_dispatch_key_included(kFilterKey, true);
  return true;
}

void disable() {
  c10::impl::tls_set_dispatch_key_included(kFilterKey, false);
  Py_XDECREF(g_dispatch);
  Py_XDECREF(g_produced);
  g_dispatch = g_produced = nullptr;
}

}  // namespace

void bind_numerics_filter(py::module& m) {
  m.def("_numerics_filter_enable", &enable, "Route ops with a watched dtype to the numerics layer.");
  m.def("_numerics_filter_disable", &disable);
  m.def("_numerics_filter_active",
        [] { return g_dispatch != nullptr && c10::impl::tls_is_dispatch_key_included(kFilterKey); });
  m.def("_numerics_filter_python_calls", [] { return g_python_calls.load(); });
}

}  // namespace torch_neuronx
