// Host views of neuron memory: the zero-copy bridge between neuron tensors
// and the host (CPU) kernels that execute them on the virtual NeuronCore.
#include "neuron_core.h"

#include <c10/core/CPUAllocator.h>

namespace torch_neuronx {
namespace {

// Keeps the neuron storage alive for as long as a CPU alias of it exists.
struct AliasOwner {
  c10::intrusive_ptr<c10::StorageImpl> neuron;
};

void release_alias(void* ctx) { delete static_cast<AliasOwner*>(ctx); }

}  // namespace

c10::Storage make_cpu_alias_storage(const c10::Storage& neuron_storage) {
  c10::StorageImpl* impl = neuron_storage.unsafeGetStorageImpl();
  void* data = const_cast<void*>(impl->data_ptr().get());
  auto* owner = new AliasOwner{c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(impl)};
  c10::DataPtr ptr(data, owner, &release_alias, c10::Device(c10::DeviceType::CPU));
  // Resizable with the CPU allocator: an out= kernel may grow its output; the
  // fallback then adopts the new bytes back into the neuron storage.
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), impl->nbytes(), std::move(ptr),
      c10::GetCPUAllocator(), /*resizable=*/true));
}

at::Tensor cpu_alias(const at::Tensor& t, const c10::Storage& alias_storage) {
  auto out = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(alias_storage), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  if (t.is_conj()) out._set_conj(true);
  if (t.is_neg()) out._set_neg(true);
  return out;
}

at::Tensor cpu_alias(const at::Tensor& t) {
  if (!t.defined() || !t.is_privateuseone()) return t;
  return cpu_alias(t, make_cpu_alias_storage(t.storage()));
}

at::Tensor neuron_view(const c10::Storage& storage, const at::Tensor& like) {
  auto out = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), like.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(like.sizes(), like.strides(),
                                                   like.storage_offset());
  if (like.is_conj()) out._set_conj(true);
  if (like.is_neg()) out._set_neg(true);
  return out;
}

}  // namespace torch_neuronx
