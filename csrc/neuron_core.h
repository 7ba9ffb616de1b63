// Shared declarations of the torch-neuronx C++ core.
//
// The core holds only what PyTorch accepts in C++ (allocator, guard, hooks,
// generator, kernels, fallback, autocast). The virtual NeuronCore topology is
// computed in Python (torch_neuronx/runtime) and handed to the core through
// `configure_runtime`, which is the seam a real Neuron runtime would replace.
#pragma once

// The Tensor class only, not <ATen/ATen.h>: that one declares every ATen op and cost ~13 s of
// compile per file that includes this header; a file includes the ops it calls (<ATen/ops/NAME.h>).
#include <ATen/core/Tensor.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Device.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace torch_neuronx {

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;
// Cores a process can address: the allocator's per-core state and host programs' buffer allocators.
constexpr int kMaxNeuronCores = 128;

// ---- runtime state (runtime_state.cpp) -------------------------------------
// Topology as seen by this process: one entry per visible logical core.
struct RuntimeConfig {
  std::vector<int64_t> hbm_capacity_bytes;  // per visible logical core
  c10::DeviceIndex default_device = 0;      // current device of a new thread
  std::string error;  // non-empty: the environment is invalid, raise on use
};

void configure_runtime(RuntimeConfig config);
c10::DeviceIndex device_count();  // 0 until configured
// What the per-op device checks read (runtime_state.cpp owns them): inline
// below because guards, streams, allocations and every op ask, ~500 times per
// transformer-block step, and a call per ask showed in callgrind.
namespace runtime_detail {
extern std::atomic<int> g_device_count;
extern std::atomic<bool> g_has_error;
// __thread: constant-initialized, so a read needs no TLS init wrapper.
extern __thread bool t_noted;          // this thread is in neuron_thread_ids()
extern __thread int t_current_device;  // -1: use g_default_device
extern std::atomic<int> g_default_device;  // the configured default, readable without the lock
void raise_device_error(c10::DeviceIndex index);  // raises the config or ordinal error, if any
void note_neuron_thread_slow();
}  // namespace runtime_detail
// The same check as check_device without noting the calling thread as a
// neuron thread: for device and stream guards, which the autograd engine runs
// several times per node (a thread that runs ops is noted by them).
inline void check_device_ordinal(c10::DeviceIndex index) {
  if (C10_UNLIKELY(runtime_detail::g_has_error.load(std::memory_order_relaxed) || index < 0 ||
                   index >= runtime_detail::g_device_count.load(std::memory_order_relaxed))) {
    runtime_detail::raise_device_error(index);
  }
}
// Raises the configuration error (naming the variable) if there is one, and
// the "invalid device ordinal" error if `index` is out of range.
inline void check_device(c10::DeviceIndex index) {
  if (C10_UNLIKELY(!runtime_detail::t_noted)) runtime_detail::note_neuron_thread_slow();
  check_device_ordinal(index);
}
int64_t hbm_capacity(c10::DeviceIndex index);
inline c10::DeviceIndex current_device() {
  const int index = runtime_detail::t_current_device;
  return static_cast<c10::DeviceIndex>(
      index >= 0 ? index : runtime_detail::g_default_device.load(std::memory_order_relaxed));
}
void set_current_device(c10::DeviceIndex index);  // checked
void mark_used(c10::DeviceIndex index);            // first allocation on a core
bool is_used(c10::DeviceIndex index);
bool is_initialized();
void mark_initialized();
std::vector<int64_t> neuron_thread_ids();  // native ids of threads that ran neuron work
bool in_bad_fork();
void check_not_in_bad_fork();

// ---- allocator (allocator.cpp) ----------------------------------------------
c10::DeviceAllocator* neuron_allocator();
// Device that owns `ptr` (an allocation start), or -1.
c10::DeviceIndex device_of_ptr(const void* ptr);
// Wrap an existing CPU storage as neuron memory on `device` without copying:
// the returned DataPtr keeps `cpu` alive and is counted in the device stats.
c10::DataPtr adopt_cpu_storage(c10::Storage cpu, c10::DeviceIndex device);

// ---- host views (cpu_alias.cpp) ---------------------------------------------
// Equal sizes or strides, element-wise: shorter than memcmp's call for the few dims a tensor has.
inline bool same_dims(c10::IntArrayRef a, c10::IntArrayRef b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}
// A CPU storage that aliases the bytes of a neuron storage and keeps it alive.
c10::Storage make_cpu_alias_storage(const c10::Storage& neuron_storage);
// A CPU storage over the bytes of `neuron` that does not keep them alive: for an alias cached
// across calls (a cache must not keep device memory alive), valid while the caller holds `neuron`.
c10::Storage make_unowned_alias_storage(const c10::StorageImpl* neuron);
// `alias` (over an unowned alias storage) still shows what `t` (storage `neuron`) shows: the same
// bytes and byte count, dtype, sizes, strides, offset and conj/neg/zero flags.
bool unowned_alias_matches(const at::Tensor& alias, const at::Tensor& t, const c10::StorageImpl* neuron);
// An unowned alias storage that something kept past the call takes a reference to `neuron`,
// so the bytes outlive it (and aliased_neuron_storage finds `neuron` again).
void own_aliased_bytes(c10::StorageImpl* alias, c10::StorageImpl* neuron);
// A CPU tensor over the same bytes, sizes, strides and offset as `t`.
at::Tensor cpu_alias(const at::Tensor& t, const c10::Storage& alias_storage);
at::Tensor cpu_alias(const at::Tensor& t);
// This thread's cache of host aliases (alias_cache.cpp): a neuron tensor used
// again (weights, saved activations, optimizer state) finds its alias made
// already instead of a new TensorImpl and StorageImpl per call.
namespace alias_cache {
struct Cache;
// This thread's cache and the inference mode of the lookups, taken once per
// call (both are thread-local reads that cost more than a lookup's compares).
struct Here {
  Cache* cache;
  bool inference;
};
Here here();
struct Lease {
  at::Tensor alias;
  c10::StorageImpl* neuron;  // the caller's storage, alive for the call
  uint32_t slot;
};
// The cached alias of `t` (storage `neuron`) when it still matches it (bytes,
// byte count, dtype, geometry, flags, inference mode) and nothing else holds
// it; an undefined alias otherwise.
Lease find(const Here& here, const at::Tensor& t, c10::StorageImpl* neuron);
// A new alias of `t` over a storage that does not own the neuron bytes (the
// cache must not keep device memory alive), cached for the next call.
Lease make(const Here& here, const at::Tensor& t, c10::StorageImpl* neuron);
// After the call (the caller's tensors still alive): an alias or alias storage
// that anything but the cache still references, or that the kernel re-pointed,
// leaves the cache, and a non-owning storage then takes a reference to the
// neuron storage so that the bytes outlive it.
void release(const Here& here, Lease& lease);
}  // namespace alias_cache
// A neuron tensor over `storage` with the geometry of `like`.
at::Tensor neuron_view(const c10::Storage& storage, const at::Tensor& like);

// A fresh host-kernel result adopted as neuron memory on `device` (no copy).
at::Tensor adopt_host_result(const at::Tensor& host, c10::DeviceIndex device);
// The same without new tensor or storage objects: when `cpu` is the only owner of
// bytes the host kernel took from a device block, it becomes neuron memory on
// `device` in place (allocator.cpp). False (nothing changed) otherwise.
bool adopt_cpu_storage_in_place(c10::StorageImpl* cpu, c10::DeviceIndex device);
// After a kernel wrote `host` (the alias of `neuron`, made over `alias_storage`):
// if it resized or re-pointed its output, move the new bytes and geometry into
// the neuron tensor, as the CPU kernel did for its own output.
void sync_written_output(const at::Tensor& neuron, const at::Tensor& host,
                         const c10::StorageImpl* alias_storage, c10::DeviceIndex device);

// ---- generator (generator.cpp) ----------------------------------------------
const at::Generator& default_generator(c10::DeviceIndex index);
at::Generator new_generator(c10::DeviceIndex index);
bool is_neuron_generator(const at::Generator& gen);
// Seeds the CPU engine of a neuron generator from its (seed, offset) state and
// returns it; `advance` then moves the offset past the numbers an op drew.
at::Generator prepare_engine(const at::Generator& gen);
void advance_offset(const at::Generator& gen, uint64_t numel);

// A compiled host program's buffer (host_program.cpp): `nbytes` of core `device`, counted as
// allocated, as a CPU DataPtr (freed like a host kernel's block).
c10::DataPtr allocate_host_block(c10::DeviceIndex device, size_t nbytes);
// The neuron storage a CPU alias made by cpu_alias(t) keeps alive, or null for any other storage.
c10::StorageImpl* aliased_neuron_storage(const c10::StorageImpl* cpu);

// ---- explicit kernels (kernels_minimal.cpp) -------------------------------
// Allocation without a dispatcher round trip, for compiled graphs' buffers.
at::Tensor empty_strided_on(c10::IntArrayRef size, c10::IntArrayRef stride, at::ScalarType dtype,
                            c10::DeviceIndex index);

// ---- fallback (fallback.cpp) ------------------------------------------------
void register_routed_ops();  // CPU-kernel ops that would otherwise decompose
std::vector<std::string> routed_op_names();
int64_t host_kernel_calls();

// ---- streams (guard.cpp) ----------------------------------------------------
void synchronize_device(c10::DeviceIndex index);

// ---- process exit (exit_drain.cpp) ------------------------------------------
void drain_autograd_workers();

}  // namespace torch_neuronx
