// The host aliases of one host-kernel call's neuron tensors, taken from this
// thread's alias cache (alias_cache.cpp) where they still match and made (and
// cached) otherwise. Within the call, every alias of one neuron storage shares
// one host storage, so a CPU kernel's overlap and view checks see what they see
// on CPU. The generic host path (host_call.h) and the explicit kernels (the
// matmul family and attention, copies, `.item()`) share it: one place decides
// how a neuron tensor becomes a CPU tensor for a call.
//
// Lifetime: the aliases are valid while the caller's neuron tensors are, i.e.
// for the call. Declare a HostAliases before any local that holds one of its
// aliases, so those locals are gone when it hands the aliases back: an alias
// still referenced then leaves the cache and takes a reference to the neuron
// bytes (correct, but it is not reused).
#pragma once

#include "neuron_core.h"

#include <c10/util/SmallVector.h>

namespace torch_neuronx {

class HostAliases {
 public:
  HostAliases() = default;
  ~HostAliases() { release(); }
  HostAliases(const HostAliases&) = delete;
  HostAliases& operator=(const HostAliases&) = delete;

  // `t` as a CPU tensor over the same bytes; any other tensor (CPU, undefined)
  // unchanged. Takes no reference to `t` (Python-owned tensors' refcounts stay
  // off the 1 <-> 2 transitions that take the GIL).
  at::Tensor of(const at::Tensor& t) {
    if (!t.defined() || !t.is_privateuseone()) return t;
    return alias(t);
  }
  std::optional<at::Tensor> of(const std::optional<at::Tensor>& t) {
    if (!t.has_value()) return std::nullopt;
    return of(*t);
  }

  // The neuron storage whose host storage is `host`, or null.
  c10::StorageImpl* neuron_storage_of(const c10::StorageImpl* host) const {
    for (const auto& entry : storages_) {
      if (entry.host == host) return entry.neuron;
    }
    return nullptr;
  }

  // Hands the cached aliases back (the destructor does it too). Whatever of
  // the call still holds an alias must be dropped first.
  void release() {
    if (leases_.empty()) return;
    storages_.clear();
    for (auto& lease : leases_) alias_cache::release(here_, lease);
    leases_.clear();
  }

 private:
  // A neuron storage and the host storage this call uses for it (owned by
  // the alias of one of `leases_`, so a plain pointer).
  struct StorageAlias {
    c10::StorageImpl* neuron;
    c10::StorageImpl* host;
  };

  at::Tensor alias(const at::Tensor& t) {
    if (leases_.empty()) here_ = alias_cache::here();
    c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
    c10::StorageImpl* known = nullptr;
    for (const auto& entry : storages_) {
      if (entry.neuron == impl) known = entry.host;
    }
    alias_cache::Lease lease = alias_cache::find(here_, t, impl);
    if (lease.alias.defined()) {
      c10::StorageImpl* host = lease.alias.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
      if (known == nullptr || known == host) {
        if (known == nullptr) storages_.push_back({impl, host});
        leases_.push_back(std::move(lease));
        return leases_.back().alias;
      }
    }
    if (known != nullptr) {
      return cpu_alias(t, c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(known)));
    }
    leases_.push_back(alias_cache::make(here_, t, impl));
    storages_.push_back({impl, leases_.back().alias.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl()});
    return leases_.back().alias;
  }

  alias_cache::Here here_{};  // taken at the first alias
  c10::SmallVector<StorageAlias, 4> storages_;
  c10::SmallVector<alias_cache::Lease, 4> leases_;
};

}  // namespace torch_neuronx
