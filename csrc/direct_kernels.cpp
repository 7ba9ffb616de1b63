// Unboxed host kernels for the hottest ops of eager training.
//
// The boxed fallback (fallback.cpp) serves every op, but boxing costs on each
// call: the arguments are copied into an IValue stack and unboxed again for the
// CPU kernel, and each copy of a Python-owned tensor moves its refcount between
// 1 and 2, which takes the GIL (twice per tensor argument) to keep its PyObject
// alive. Measured with callgrind on add (16,), that was about half of the
// per-op cost over CPU. These kernels take the caller's references instead and
// run the same conversions (host_call.h) and the same CPU kernel through the
// dispatcher, so results stay bit-identical to CPU.
//
// The list holds ops with a CPU kernel and only tensor, optional-tensor and
// plain value arguments (no device, generator or tensor-list arguments, which
// the boxed path handles).
#include "host_call.h"
#include "tools_core.h"

#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_ops.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addcdiv_ops.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/fill_ops.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/native_layer_norm_backward_ops.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/rsqrt_ops.h>
#include <ATen/ops/silu_backward_ops.h>
#include <ATen/ops/silu_ops.h>
#include <ATen/ops/sqrt_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <ATen/ops/where_ops.h>
#include <ATen/ops/zero_ops.h>
#include <torch/library.h>

#include <tuple>
#include <type_traits>

namespace torch_neuronx {
namespace {

using host_call::HostCall;

// An argument as the CPU kernel receives it: neuron tensors as host aliases,
// everything else as it came.
template <class A>
struct HostArg {
  using Plain = std::decay_t<A>;
  static_assert(!std::is_same_v<Plain, c10::Device> && !std::is_same_v<Plain, std::optional<c10::Device>> &&
                    !std::is_same_v<Plain, std::optional<at::Generator>> &&
                    !std::is_same_v<Plain, at::TensorList> && !std::is_same_v<Plain, at::ITensorListRef>,
                "ops with device, generator or tensor-list arguments take the boxed fallback");
  static A map(HostCall&, A a) { return a; }
};
template <>
struct HostArg<const at::Tensor&> {
  static at::Tensor map(HostCall& call, const at::Tensor& t) { return call.borrow_to_host(t, false); }
};
template <>
struct HostArg<at::Tensor&> {  // Tensor(a!): in-place self, out=
  static at::Tensor map(HostCall& call, at::Tensor& t) { return call.borrow_to_host(t, true); }
};
template <>
struct HostArg<const std::optional<at::Tensor>&> {
  static std::optional<at::Tensor> map(HostCall& call, const std::optional<at::Tensor>& t) {
    if (!t.has_value()) return std::nullopt;
    return call.borrow_to_host(*t, false);
  }
};

// A result as the caller receives it.
template <class R>
struct HostResult;
template <>
struct HostResult<at::Tensor> {
  static at::Tensor map(HostCall& call, const at::Tensor& r) { return call.result_from_host(r); }
};
template <>
struct HostResult<at::Tensor&> {
  static at::Tensor& map(HostCall& call, const at::Tensor& r) { return call.written_neuron(r); }
};
template <class... T>
struct HostResult<std::tuple<T...>> {
  static std::tuple<T...> map(HostCall& call, const std::tuple<T...>& r) {
    return std::apply([&](const auto&... each) { return std::tuple<T...>{HostResult<T>::map(call, each)...}; },
                      r);
  }
};

template <class Op, class Sig = typename Op::schema>
struct Direct;

template <class Op, class R, class... A>
struct Direct<Op, R(A...)> {
  static const c10::OperatorHandle& handle() {
    static const c10::OperatorHandle op =
        c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
    return op;
  }
  // The op's tracking slot, resolved once (slots never move or go away).
  static OpSlot* slot() {
    static OpSlot* const s = op_slot(handle());
    return s;
  }

  static R call(A... args) {
    count_host_kernel_call();
    const c10::OperatorHandle& op = handle();
    HostCall call(op);
    // Braced initialisation converts the arguments in order, as the boxed path does.
    std::tuple<decltype(HostArg<A>::map(call, std::declval<A>()))...> host{HostArg<A>::map(call, args)...};
    call.validate_devices();
    auto run = [](auto&... h) -> R {
      return Op::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), h...);
    };
    if constexpr (std::is_same_v<R, at::Tensor&>) {
      const at::Tensor* result;
      {
        OpScope scope(slot(), call.device());
        result = &std::apply(run, host);
      }
      call.sync_written_arguments();
      return HostResult<R>::map(call, *result);
    } else {
      std::optional<R> result;
      {
        // Counts the op, times the core, and backs the kernel's allocations with device memory.
        OpScope scope(slot(), call.device());
        result.emplace(std::apply(run, host));
      }
      call.sync_written_arguments();
      return HostResult<R>::map(call, *result);
    }
  }
};

// name, ATen op struct: one line per op.
#define NEURON_DIRECT_OPS(X)                                       \
  X("add.Tensor", add_Tensor)                                      \
  X("add_.Tensor", add__Tensor)                                    \
  X("sub.Tensor", sub_Tensor)                                      \
  X("sub_.Tensor", sub__Tensor)                                    \
  X("mul.Tensor", mul_Tensor)                                      \
  X("mul_.Tensor", mul__Tensor)                                    \
  X("div.Tensor", div_Tensor)                                      \
  X("div_.Tensor", div__Tensor)                                    \
  X("addcmul_", addcmul_)                                          \
  X("addcdiv_", addcdiv_)                                          \
  X("sum.dim_IntList", sum_dim_IntList)                            \
  X("mean.dim", mean_dim)                                          \
  X("neg", neg)                                                    \
  X("exp", exp)                                                    \
  X("sqrt", sqrt)                                                  \
  X("rsqrt", rsqrt)                                                \
  X("tanh", tanh)                                                  \
  X("relu", relu)                                                  \
  X("threshold_backward", threshold_backward)                      \
  X("gelu", gelu)                                                  \
  X("gelu_backward", gelu_backward)                                \
  X("silu", silu)                                                  \
  X("silu_backward", silu_backward)                                \
  X("_softmax", _softmax)                                          \
  X("_softmax_backward_data", _softmax_backward_data)              \
  X("native_layer_norm", native_layer_norm)                        \
  X("native_layer_norm_backward", native_layer_norm_backward)      \
  X("where.self", where_self)                                      \
  X("fill_.Scalar", fill__Scalar)                                  \
  X("zero_", zero_)

}  // namespace

std::vector<std::string> direct_op_names() {
#define NEURON_DIRECT_NAME(name, op) "aten::" name,
  return {NEURON_DIRECT_OPS(NEURON_DIRECT_NAME)};
#undef NEURON_DIRECT_NAME
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define NEURON_DIRECT_IMPL(name, op) m.impl(name, TORCH_FN(Direct<at::_ops::op>::call));
  NEURON_DIRECT_OPS(NEURON_DIRECT_IMPL)
#undef NEURON_DIRECT_IMPL
}

}  // namespace torch_neuronx
