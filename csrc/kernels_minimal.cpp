// Explicit kernels: what tensor creation, views, resizing and copies need.
// Everything else reaches the zero-copy host fallback (fallback.cpp).
#include "host_aliases.h"
#include "neuron_core.h"

#include <ATen/EmptyTensor.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

namespace torch_neuronx {
namespace {

// The allocator allocates on the current core: a factory for core `index` makes it current
// for the call. Only when it is not already: a device guard is two virtual calls into the guard
// implementation and its code, for every buffer a compiled graph allocates (all on one core).
class OnCore {
 public:
  explicit OnCore(c10::DeviceIndex index) {
    if (C10_UNLIKELY(index != current_device())) guard_.emplace(c10::Device(kNeuron, index));
  }

 private:
  std::optional<c10::DeviceGuard> guard_;
};

c10::DeviceIndex target_index(std::optional<c10::Device> device) {
  if (device.has_value() && device->has_index()) return device->index();
  return current_device();
}

at::Tensor neuron_empty(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                        std::optional<at::Layout> layout, std::optional<c10::Device> device,
                        std::optional<bool> pin_memory,
                        std::optional<c10::MemoryFormat> memory_format) {
  const c10::DeviceIndex index = target_index(device);
  check_device(index);
  TORCH_CHECK(!pin_memory.value_or(false),
              "pin_memory=True only applies to CPU tensors; drop it for neuron tensors.");
  OnCore on_core(index);
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_generic(size, neuron_allocator(), keys,
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor neuron_empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                                std::optional<at::ScalarType> dtype,
                                std::optional<at::Layout> layout,
                                std::optional<c10::Device> device,
                                std::optional<bool> pin_memory) {
  const c10::DeviceIndex index = target_index(device);
  check_device(index);
  OnCore on_core(index);
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_strided_generic(size, stride, neuron_allocator(), keys,
                                           c10::dtype_or_default(dtype));
}

at::Tensor neuron_as_strided(const at::Tensor& self, c10::IntArrayRef size,
                             c10::IntArrayRef stride, std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor neuron_view_kernel(const at::Tensor& self, c10::IntArrayRef size) {
  return at::native::view(self, size);
}

at::Tensor neuron_reshape_alias(const at::Tensor& self, c10::IntArrayRef size,
                                c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

const at::Tensor& neuron_resize(const at::Tensor& self, c10::IntArrayRef size,
                                std::optional<c10::MemoryFormat> memory_format) {
  // Growing allocates through the storage's allocator on the tensor's core.
  // ATen sets the new sizes before it allocates: when the allocation fails
  // (out of HBM, or a size that overflows), put the old geometry back, so the
  // tensor still describes the bytes it owns and stays safe to read.
  c10::DeviceGuard guard(self.device());
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  const std::vector<int64_t> sizes = self.sizes().vec();
  const std::vector<int64_t> strides = self.strides().vec();
  const int64_t offset = self.storage_offset();
  try {
    return at::native::resize_(self, size, memory_format);
  } catch (...) {
    impl->set_sizes_and_strides(sizes, strides, offset);
    throw;
  }
}

at::Tensor& neuron_set_storage(at::Tensor& self, c10::Storage source, int64_t storage_offset,
                               c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::set_storage_cpu_(self, source, storage_offset, size, stride);
}

at::Tensor& neuron_set_source_storage(at::Tensor& self, c10::Storage source) {
  const int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return neuron_set_storage(self, source, 0, {numel}, {});
}

at::Tensor& neuron_set_tensor(at::Tensor& self, const at::Tensor& source) {
  return at::native::set_tensor_(self, source);
}

at::Tensor& neuron_set_empty(at::Tensor& self) {
  c10::DeviceGuard guard(self.device());
  const c10::Storage storage(c10::Storage::use_byte_size_t(), 0, neuron_allocator(),
                             /*resizable=*/true);
  return neuron_set_storage(self, storage, 0, {0}, {});
}

// Copies between any mix of CPU and neuron tensors (and between cores) run on
// the host, over aliases of the same bytes: dtype conversion, broadcasting and
// strides behave exactly as the CPU copy kernel. Two views of one neuron
// storage get one host storage (host_aliases.h), so the CPU kernel sees (and
// rejects) overlap.
at::Tensor neuron_copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  if (self.is_privateuseone() && dst.is_privateuseone() && self.is_same(dst)) return dst;
  HostAliases aliases;
  at::Tensor dst_host = aliases.of(dst);
  at::native::copy_(dst_host, aliases.of(self), non_blocking);
  return dst;
}

at::Tensor neuron_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) {
    c10::DeviceGuard guard(dst.device());
    at::native::resize_(dst, self.sizes(), std::nullopt);
  }
  return neuron_copy_from(self, dst, false);
}

at::Scalar neuron_local_scalar_dense(const at::Tensor& self) {
  HostAliases aliases;
  return at::_local_scalar_dense(aliases.of(self));
}

// ZeroTensors carry no memory; the CPU kernel's NULL storage must keep its
// ZeroTensor key on neuron, or reading it would dereference NULL.
at::Tensor neuron_efficientzerotensor(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                      std::optional<at::Layout>, std::optional<c10::Device> device,
                                      std::optional<bool>) {
  const c10::Device dev(kNeuron, target_index(device));
  check_device(dev.index());
  auto allocator = at::native::ZeroTensorAllocator(dev);
  const auto keys = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1) |
                    c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return at::detail::empty_generic(size, &allocator, keys, c10::dtype_or_default(dtype),
                                   std::nullopt);
}

// Integer histc, as CUDA offers it (transformers' grouped-mm MoE routing uses
// it on every device but cpu/mps); the CPU kernel accepts floating types only,
// so counts are taken in double (exact for any int32 and for int64 below 2^53).
at::Tensor neuron_histc(const at::Tensor& self, int64_t bins, const at::Scalar& min,
                        const at::Scalar& max) {
  HostAliases aliases;
  const at::Tensor host = aliases.of(self);
  if (!at::isIntegralType(self.scalar_type(), /*includeBool=*/true)) {
    return adopt_host_result(at::histc(host, bins, min, max), self.device().index());
  }
  const at::Tensor counts = at::histc(host.to(at::kDouble), bins, min, max);
  return adopt_host_result(counts.to(self.scalar_type()), self.device().index());
}

// Work is complete when issued (synchronous host execution): nothing to track.
void neuron_record_stream(at::Tensor&, c10::Stream) {}

// SDPA picks its kernel through this stub; answer as the CPU would, so the
// neuron device runs the same fused CPU kernel and matches CPU bit for bit.
int64_t neuron_fused_sdp_choice(const at::Tensor& query, const at::Tensor& key,
                                const at::Tensor& value, const std::optional<at::Tensor>& mask,
                                double dropout_p, bool is_causal, std::optional<double> scale,
                                bool enable_gqa) {
  // The choice reads metadata only. Under tracing the arguments are fake
  // tensors: keep Python modes (FakeTensorMode) out of the CPU redispatch.
  c10::impl::ExcludeDispatchKeyGuard no_python(
      c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
  // `sdpa_kernel(SDPBackend.OVERRIDEABLE)` (the only backend left enabled)
  // selects the backend hook, _scaled_dot_product_fused_attention_overrideable
  // (torch_neuronx/kernels/sdpa_overrideable.py); by default the CPU's choice stands.
  const auto& ctx = at::globalContext();
  if (ctx.userEnabledOverrideableSDP() && !ctx.userEnabledFlashSDP() && !ctx.userEnabledMathSDP()) {
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  }
  // Fresh aliases, not the thread's cache: under tracing these are fake tensors
  // with no bytes, and the choice reads their metadata only.
  std::optional<at::Tensor> host_mask;
  if (mask.has_value()) host_mask = cpu_alias(*mask);
  return at::_fused_sdp_choice(cpu_alias(query), cpu_alias(key), cpu_alias(value), host_mask,
                               dropout_p, is_causal, scale, enable_gqa);
}

}  // namespace

at::Tensor empty_strided_on(c10::IntArrayRef size, c10::IntArrayRef stride, at::ScalarType dtype,
                            c10::DeviceIndex index) {
  check_device(index);
  OnCore on_core(index);
  return at::detail::empty_strided_generic(
      size, stride, neuron_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(neuron_empty));
  m.impl("empty_strided", TORCH_FN(neuron_empty_strided));
  m.impl("as_strided", TORCH_FN(neuron_as_strided));
  m.impl("view", TORCH_FN(neuron_view_kernel));
  m.impl("_reshape_alias", TORCH_FN(neuron_reshape_alias));
  m.impl("resize_", TORCH_FN(neuron_resize));
  m.impl("set_.source_Storage", TORCH_FN(neuron_set_source_storage));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(neuron_set_storage));
  m.impl("set_.source_Tensor", TORCH_FN(neuron_set_tensor));
  m.impl("set_", TORCH_FN(neuron_set_empty));
  m.impl("_copy_from", TORCH_FN(neuron_copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(neuron_copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(neuron_local_scalar_dense));
  m.impl("record_stream", TORCH_FN(neuron_record_stream));
  m.impl("_efficientzerotensor", TORCH_FN(neuron_efficientzerotensor));
  m.impl("histc", TORCH_FN(neuron_histc));
}

// copy_ skips the conjugate/negative-bit fallbacks; _copy_from must too, or
// that fallback materialises the source with clone() -> copy_ -> _copy_from
// -> ... without end. The host aliases carry the bits and the CPU copy kernel
// resolves them.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace torch_neuronx

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_neuronx::neuron_fused_sdp_choice);
}  // namespace at::native
