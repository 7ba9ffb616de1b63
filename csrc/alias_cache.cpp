// Host aliases reused across calls: each thread keeps the CPU alias it made
// for a neuron tensor, keyed by bytes and geometry, so the next op on the same
// tensor (a weight, a saved activation, an optimizer's state) takes it instead
// of a new TensorImpl and StorageImpl. Measured with callgrind on add (16,):
// making and freeing the two aliases was ~2/3 of the per-op cost over CPU.
//
// The cached alias storages do not own the neuron bytes (a cache must not keep
// device memory alive); they are valid while the caller's neuron tensor is,
// i.e. for the call. A lookup trusts nothing but content: same data pointer and
// byte count as the caller's storage, same dtype, sizes, strides, offset,
// conj/neg/zero flags and inference mode, and no other reference to it. After
// the call, an alias that something still references (a kernel kept it, an
// exception left it on a stack, Python wrapped it) leaves the cache and, if
// non-owning, takes a strong reference to the neuron storage, as every alias
// did before; one whose storage the kernel re-pointed or regrew leaves it too.
// Thread-local: no locks, and no other thread ever sees a cached alias.
#include "neuron_core.h"

#include <c10/core/InferenceMode.h>

#include <array>

namespace torch_neuronx {
namespace alias_cache {

constexpr int kSlotBits = 8;

struct Slot {
  at::Tensor alias;
  bool inference = false;
};

struct Cache {
  std::array<Slot, size_t(1) << kSlotBits> slots;
};

namespace {

uint32_t slot_of(const at::Tensor& t, const c10::StorageImpl* neuron) {
  uint64_t h = reinterpret_cast<uintptr_t>(neuron->data_ptr().get());
  h ^= static_cast<uint64_t>(t.storage_offset()) * 0x9E3779B97F4A7C15ull;
  const int64_t dim = t.dim();
  h ^= static_cast<uint64_t>(dim) << 40;
  if (dim > 0) {
    h ^= static_cast<uint64_t>(t.sizes()[dim - 1]) * 0xC2B2AE3D27D4EB4Full;
    h ^= static_cast<uint64_t>(t.strides()[0]) * 0x165667B19E3779F9ull;
  }
  return static_cast<uint32_t>((h * 0x9E3779B97F4A7C15ull) >> (64 - kSlotBits));
}

}  // namespace

Here here() {
  thread_local Cache c;
  return {&c, c10::InferenceMode::is_enabled()};
}

Lease find(const Here& here, const at::Tensor& t, c10::StorageImpl* neuron) {
  const uint32_t index = slot_of(t, neuron);
  const Slot& slot = here.cache->slots[index];
  if (!slot.alias.defined() || slot.alias.use_count() != 1 ||
      slot.alias.unsafeGetTensorImpl()->unsafe_storage().use_count() != 1 ||
      slot.inference != here.inference || !unowned_alias_matches(slot.alias, t, neuron)) {
    return {at::Tensor(), neuron, index};
  }
  return {slot.alias, neuron, index};
}

Lease make(const Here& here, const at::Tensor& t, c10::StorageImpl* neuron) {
  const uint32_t index = slot_of(t, neuron);
  at::Tensor alias = cpu_alias(t, make_unowned_alias_storage(neuron));  // no owner: see the top
  Slot& slot = here.cache->slots[index];
  slot.alias = alias;
  slot.inference = here.inference;
  return {std::move(alias), neuron, index};
}

void release(const Here& here, Lease& lease) {
  if (!lease.alias.defined()) return;
  Slot& slot = here.cache->slots[lease.slot];
  const bool cached = slot.alias.unsafeGetTensorImpl() == lease.alias.unsafeGetTensorImpl();
  c10::TensorImpl* a = lease.alias.unsafeGetTensorImpl();
  c10::StorageImpl* s = a->unsafe_storage().unsafeGetStorageImpl();
  const bool owns = s->data_ptr().get_context() != nullptr;  // re-pointed or regrown by the kernel
  const bool held = lease.alias.use_count() > (cached ? 2u : 1u) || c10::raw::intrusive_ptr::use_count(s) > 1 ||
                    a->pyobj_slot()->load_pyobj() != nullptr;
  if (held && !owns && s->data_ptr().get() == lease.neuron->data_ptr().get()) {
    own_aliased_bytes(s, lease.neuron);
  }
  if (cached && (held || owns)) slot.alias.reset();
  lease.alias.reset();
}

}  // namespace alias_cache
}  // namespace torch_neuronx
