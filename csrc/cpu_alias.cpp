// Host views of neuron memory: the zero-copy bridge between neuron tensors
// and the host (CPU) kernels that execute them on the virtual NeuronCore.
#include "neuron_core.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/CPUAllocator.h>

#include <typeinfo>

namespace torch_neuronx {
namespace {

// The alias's context is a strong reference to the neuron storage (no owner
// object to allocate per alias): it keeps the neuron bytes alive for as long as
// a CPU alias of them exists.
void release_alias(void* ctx) {
  c10::intrusive_ptr<c10::StorageImpl>::reclaim(static_cast<c10::StorageImpl*>(ctx));
}

// A CPU DataPtr over `data` that holds a reference to `neuron` (owning aliases, and unowned
// ones something kept past their call).
c10::DataPtr owning_ptr(void* data, c10::StorageImpl* neuron) {
  c10::StorageImpl* owner = c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(neuron).release();
  return c10::DataPtr(data, owner, &release_alias, c10::Device(c10::DeviceType::CPU));
}

}  // namespace

c10::StorageImpl* aliased_neuron_storage(const c10::StorageImpl* cpu) {
  const c10::DataPtr& data = cpu->data_ptr();
  return data.get_deleter() == &release_alias ? static_cast<c10::StorageImpl*>(data.get_context()) : nullptr;
}

c10::Storage make_cpu_alias_storage(const c10::Storage& neuron_storage) {
  c10::StorageImpl* impl = neuron_storage.unsafeGetStorageImpl();
  c10::DataPtr ptr = owning_ptr(const_cast<void*>(impl->data_ptr().get()), impl);
  // Resizable with the CPU allocator: an out= kernel may grow its output; the
  // fallback then adopts the new bytes back into the neuron storage.
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), impl->nbytes(), std::move(ptr),
      c10::GetCPUAllocator(), /*resizable=*/true));
}

c10::Storage make_unowned_alias_storage(const c10::StorageImpl* neuron) {
  void* data = const_cast<void*>(neuron->data_ptr().get());
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), neuron->nbytes(), c10::DataPtr(data, c10::Device(c10::DeviceType::CPU)),
      c10::GetCPUAllocator(), /*resizable=*/true));
}

bool unowned_alias_matches(const at::Tensor& alias, const at::Tensor& t, const c10::StorageImpl* neuron) {
  const c10::TensorImpl* a = alias.unsafeGetTensorImpl();
  const c10::StorageImpl* s = a->unsafe_storage().unsafeGetStorageImpl();
  return s->data_ptr().get() == neuron->data_ptr().get() && s->nbytes() == neuron->nbytes() &&
         s->data_ptr().get_context() == nullptr && a->dtype() == t.dtype() &&
         a->storage_offset() == t.storage_offset() && same_dims(a->sizes(), t.sizes()) &&
         same_dims(a->strides(), t.strides()) && a->is_conj() == t.is_conj() && a->is_neg() == t.is_neg() &&
         a->_is_zerotensor() == t._is_zerotensor();
}

void own_aliased_bytes(c10::StorageImpl* alias, c10::StorageImpl* neuron) {
  alias->set_data_ptr_noswap(owning_ptr(const_cast<void*>(alias->data_ptr().get()), neuron));
}

namespace {

// A tensor must lie inside its storage before a host kernel reads or writes
// it: `untyped_storage().resize_(0)` (FSDP2 frees parameters that way) leaves
// the sizes in place, and a kernel would then touch memory the tensor no
// longer owns. Zero tensors own no bytes by design.
void check_inside_storage(const at::Tensor& t, const c10::Storage& storage) {
  if (t._is_zerotensor() || t.numel() == 0) return;
  const size_t needed = at::detail::computeStorageNbytes(t.sizes(), t.strides(),
                                                         t.dtype().itemsize(), t.storage_offset());
  TORCH_CHECK(needed <= storage.nbytes(), "neuron tensor of shape ", t.sizes(), " (", t.dtype(),
              ", storage offset ", t.storage_offset(), ") needs ", needed,
              " bytes of storage, but its storage holds ", storage.nbytes(),
              " bytes (was untyped_storage().resize_() called on it?). Grow the storage back with "
              "untyped_storage().resize_(", needed, ") and refill it, or use a new tensor.");
}

}  // namespace

at::Tensor cpu_alias(const at::Tensor& t, const c10::Storage& alias_storage) {
  check_inside_storage(t, alias_storage);
  auto out = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(alias_storage), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  if (t.is_conj()) out._set_conj(true);
  if (t.is_neg()) out._set_neg(true);
  if (t._is_zerotensor()) out.unsafeGetTensorImpl()->_set_zero(true);
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
  if (like._is_zerotensor()) out.unsafeGetTensorImpl()->_set_zero(true);
  return out;
}

namespace {

// A fresh result that nothing else references (a plain dense CPU tensor whose
// bytes came from a device block) becomes the neuron tensor itself: its storage
// turns into neuron memory and its dispatch keys into neuron keys, instead of
// wrapping it in a new storage and tensor that keep it alive. Same bytes, same
// geometry and flags, two allocations and frees fewer per op.
bool adopt_in_place(const at::Tensor& host, c10::DeviceIndex device) {
  c10::TensorImpl* impl = host.unsafeGetTensorImpl();
  if (host.use_count() != 1 || host.weak_use_count() > 1 /* 1: no weak reference */ || typeid(*impl) != typeid(c10::TensorImpl) ||
      !host.is_cpu() || host.layout() != at::kStrided || impl->is_wrapped_number() ||
      impl->is_python_dispatch() || !host.has_storage() || host.storage().use_count() != 1) {
    return false;
  }
  if (!adopt_cpu_storage_in_place(host.storage().unsafeGetStorageImpl(), device)) return false;
  impl->set_storage_keep_dtype(host.storage());  // the tensor's device follows its storage's
  impl->_change_backend_component_keys(c10::Device(kNeuron, device));
  return true;
}

}  // namespace

at::Tensor adopt_host_result(const at::Tensor& host, c10::DeviceIndex device) {
  if (adopt_in_place(host, device)) return host;
  c10::Storage adopted(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), host.storage().nbytes(),
      adopt_cpu_storage(host.storage(), device), neuron_allocator(), /*resizable=*/true));
  return neuron_view(adopted, host);
}

namespace {

// The kernel changed its out= alias (re-pointed, regrown or restrided it): the neuron
// tensor follows. Rare, so out of line: sync_written_output's check stays a few lines of
// code, which the matmul externs of a compiled graph run after every call.
C10_NOINLINE void sync_changed_output(const at::Tensor& neuron, const at::Tensor& host,
                                      const c10::StorageImpl* alias_storage, c10::DeviceIndex device) {
  c10::StorageImpl* host_storage = host.storage().unsafeGetStorageImpl();
  c10::StorageImpl* dev_storage = neuron.storage().unsafeGetStorageImpl();
  if (host_storage != alias_storage) {
    // The kernel re-pointed its output at a new storage (set_): adopt it.
    c10::Storage adopted(c10::make_intrusive<c10::StorageImpl>(
        c10::StorageImpl::use_byte_size_t(), host.storage().nbytes(),
        adopt_cpu_storage(host.storage(), device), neuron_allocator(), true));
    neuron.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(adopted));
  } else if (host_storage->data_ptr().get() != dev_storage->data_ptr().get() ||
             host_storage->nbytes() != dev_storage->nbytes()) {
    // The kernel grew the alias storage: the neuron storage takes the new bytes.
    const size_t nbytes = host_storage->nbytes();
    dev_storage->set_data_ptr_noswap(adopt_cpu_storage(host.storage(), device));
    dev_storage->set_nbytes(nbytes);
  }
  if (host.sizes() != neuron.sizes() || host.strides() != neuron.strides() ||
      host.storage_offset() != neuron.storage_offset()) {
    neuron.unsafeGetTensorImpl()->set_sizes_and_strides(host.sizes(), host.strides(),
                                                        host.storage_offset());
  }
}

}  // namespace

void sync_written_output(const at::Tensor& neuron, const at::Tensor& host,
                         const c10::StorageImpl* alias_storage, c10::DeviceIndex device) {
  const c10::TensorImpl* h = host.unsafeGetTensorImpl();
  const c10::TensorImpl* n = neuron.unsafeGetTensorImpl();
  const c10::StorageImpl* host_storage = h->unsafe_storage().unsafeGetStorageImpl();
  const c10::StorageImpl* dev_storage = n->unsafe_storage().unsafeGetStorageImpl();
  if (C10_LIKELY(host_storage == alias_storage && host_storage->data_ptr().get() == dev_storage->data_ptr().get() &&
                 host_storage->nbytes() == dev_storage->nbytes() && h->storage_offset() == n->storage_offset() &&
                 same_dims(h->sizes(), n->sizes()) && same_dims(h->strides(), n->strides()))) {
    return;
  }
  sync_changed_output(neuron, host, alias_storage, device);
}

}  // namespace torch_neuronx
