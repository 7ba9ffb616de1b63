// The zero-copy host fallback: how the virtual NeuronCore executes an ATen op.
//
// Each neuron tensor argument is replaced by a CPU tensor aliasing the same
// bytes (no copy), the op is redispatched to its CPU kernel, and the results
// are mapped back: in-place and out= results become the original neuron
// tensors, views of an input stay views of its neuron storage, and fresh
// results are adopted into neuron memory without a copy. Random ops draw from
// the neuron generator's CPU engine (generator.cpp). The conversions live in
// host_call.h, shared with the unboxed kernels of the hottest ops
// (direct_kernels.cpp), which bypass this boxed path.
#include "host_call.h"
#include "neuron_core.h"
#include "tools_core.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <atomic>
#include <mutex>
#include <sstream>
#include <unordered_set>

namespace torch_neuronx {
bool low_precision_gemm_fp32_for(at::ScalarType dtype);  // kernels_matmul.cpp
namespace {

std::atomic<int64_t> g_host_kernel_calls{0};

using host_call::HostCall;

// Convolutions run as bf16/fp16 GEMMs (im2col) on the CPU; where the host GEMM policy says fp32
// for their dtype (kernels_matmul.cpp), their operands are converted to fp32 once and their
// results rounded once, as the matmul kernels do.
bool is_fp32_accumulated_op(const c10::OperatorHandle& op) {
  static const auto conv = c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution", "");
  static const auto conv_backward =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution_backward", "");
  return op == conv || op == conv_backward;
}

// The one low-precision dtype of the op's tensor arguments (the last `n` stack entries), or Undefined.
at::ScalarType low_precision_arguments(const torch::jit::Stack& stack, size_t n) {
  at::ScalarType dtype = at::ScalarType::Undefined;
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    if (!stack[i].isTensor() || !stack[i].toTensor().defined()) continue;
    const auto st = stack[i].toTensor().scalar_type();
    if (dtype != at::ScalarType::Undefined && st != dtype) return at::ScalarType::Undefined;
    dtype = st;
  }
  return (dtype == at::kBFloat16 || dtype == at::kHalf) && low_precision_gemm_fp32_for(dtype)
             ? dtype
             : at::ScalarType::Undefined;
}

void widen_arguments(torch::jit::Stack& stack, size_t n) {
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    if (stack[i].isTensor() && stack[i].toTensor().defined()) stack[i] = stack[i].toTensor().to(at::kFloat);
  }
}

void narrow_returns(torch::jit::Stack& stack, size_t n, at::ScalarType dtype) {
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    if (stack[i].isTensor() && stack[i].toTensor().defined()) stack[i] = stack[i].toTensor().to(dtype);
  }
}

void neuron_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  count_host_kernel_call();
  HostCall call(op);
  call.convert_arguments(stack);
  call.bind_generators(stack);
  const size_t num_returns = op.schema().returns().size();
  {
    // Counts the op, times the core, and backs the kernel's allocations with device memory.
    OpScope scope(op_slot(op), call.device());
    at::ScalarType narrow_to = at::ScalarType::Undefined;
    if (C10_UNLIKELY(is_fp32_accumulated_op(op))) {
      const size_t num_args = op.schema().arguments().size();
      narrow_to = low_precision_arguments(*stack, num_args);
      if (narrow_to != at::ScalarType::Undefined) widen_arguments(*stack, num_args);
    }
    auto locks = call.lock_generators();
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    call.advance_generators(stack, num_returns);
    if (narrow_to != at::ScalarType::Undefined) narrow_returns(*stack, num_returns, narrow_to);
  }
  call.sync_written_arguments();
  call.convert_returns(stack, num_returns);
}

// Ops that branch on the device type inside a composite kernel; on neuron they
// must take the CPU branch to run the CPU kernels.
const char* kDeviceBranchingComposites[] = {
    "convolution", "convolution_backward", "_convolution", "_convolution.deprecated",
    "mode.values",
};

// Kept on their composite (or explicit) kernels: device transfers and
// creation must stay on neuron.
bool keep_composite(const c10::OperatorHandle& op) {
  static const std::unordered_set<std::string> keep = {
      "aten::_to_copy", "aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize",
      "aten::clone", "aten::lift", "aten::lift_fresh", "aten::lift_fresh_copy",
      "aten::_pin_memory", "aten::is_pinned", "aten::pin_memory", "aten::record_stream",
      "aten::_local_scalar_dense", "aten::item", "aten::_has_compatible_shallow_copy_type",
      "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty",
      "aten::new_empty_strided", "aten::resize_", "aten::set_", "aten::to",
      "aten::_fused_sdp_choice", "aten::is_set_to", "aten::_nested_tensor_from_mask"};
  const auto& schema = op.schema();
  if (keep.count(schema.name())) return true;
  // View ops keep their composite: it builds the view with as_strided/view.
  for (const auto& ret : schema.returns()) {
    if (ret.alias_info() != nullptr && !ret.alias_info()->isWrite()) return true;
  }
  return false;
}

std::mutex g_route_mutex;
std::vector<std::string> g_routed;
torch::Library* g_route_library = nullptr;

std::string overload_name(const c10::OperatorName& name) {
  std::string out = name.name.substr(name.name.find("::") + 2);
  if (!name.overload_name.empty()) out += "." + name.overload_name;
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
}

void register_routed_ops() {
  std::lock_guard<std::mutex> lock(g_route_mutex);
  if (g_route_library != nullptr) return;
  g_route_library = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1,
                                       __FILE__, __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  std::unordered_set<std::string> forced;
  for (const char* name : kDeviceBranchingComposites) forced.insert(name);
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto handle = dispatcher.findOp(name);
    if (!handle.has_value()) continue;
    const std::string short_name = overload_name(name);
    if (handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;
    const bool composite =
        handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
        handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional);
    const bool cpu_kernel = handle->hasKernelForDispatchKey(c10::DispatchKey::CPU);
    // CompositeImplicit too: a handful of ops (mish_backward,
    // native_channel_shuffle) have a CPU kernel that CPU runs instead of it.
    const bool implicit =
        handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
    const bool route = forced.count(short_name) > 0 || ((composite || implicit) && cpu_kernel);
    if (!route || keep_composite(*handle)) continue;
    g_route_library->impl(short_name.c_str(),
                          torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
    g_routed.push_back(name.name + (name.overload_name.empty() ? "" : "." + name.overload_name));
  }
}

std::vector<std::string> routed_op_names() {
  std::lock_guard<std::mutex> lock(g_route_mutex);
  std::vector<std::string> names = g_routed;
  for (std::string& name : direct_op_names()) names.push_back(std::move(name));
  return names;
}

void count_host_kernel_call() { g_host_kernel_calls.fetch_add(1, std::memory_order_relaxed); }

int64_t host_kernel_calls() { return g_host_kernel_calls.load(); }

}  // namespace torch_neuronx
