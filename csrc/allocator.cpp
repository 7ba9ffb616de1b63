// Device memory of the virtual NeuronCores.
//
// Device memory is host memory owned by this allocator. Every allocation is
// charged to one logical core, whose HBM capacity is enforced, and counted in
// the same DeviceStats structure CUDA's caching allocator reports, so that
// torch.neuron.memory_* and torch.accelerator.memory_* are exact. There is no
// caching layer: reserved bytes equal allocated bytes and empty_cache() has
// nothing to release.
#include "neuron_core.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <array>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace torch_neuronx {
namespace {

using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingAllocator::StatType;

constexpr size_t kSmallPoolLimit = 1 << 20;  // 1 MiB, as TorchNeuron's pools

// One allocation. `cpu_owner` is set when the bytes were produced by a host
// kernel and adopted into device memory without a copy.
struct Block {
  void* ptr;
  size_t size;
  c10::DeviceIndex device;
  c10::Storage cpu_owner;
};

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f %s", value, units[unit]);
  return buf;
}

class NeuronAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::DeviceIndex device = current_device();
    check_device(device);
    check_not_in_bad_fork();
    if (nbytes == 0) {
      return {nullptr, nullptr, &free_block, c10::Device(kNeuron, device)};
    }
    reserve(device, nbytes);
    void* ptr = nullptr;
    try {
      ptr = c10::alloc_cpu(nbytes);
    } catch (const c10::Error&) {
      unreserve(device, nbytes);
      TORCH_CHECK_WITH(OutOfMemoryError, false, "Neuron out of memory: the host could not back ",
                       format_bytes(nbytes), " for neuron:", int(device),
                       " (device memory of the virtual NeuronCore is host memory).");
    }
    auto* block = new Block{ptr, nbytes, device, {}};
    record(block);
    return {ptr, block, &free_block, c10::Device(kNeuron, device)};
  }

  c10::DataPtr adopt(c10::Storage cpu, c10::DeviceIndex device) {
    const size_t nbytes = cpu.nbytes();
    void* ptr = cpu.mutable_data();
    if (nbytes == 0 || ptr == nullptr) {
      return {nullptr, nullptr, &free_block, c10::Device(kNeuron, device)};
    }
    reserve(device, nbytes);
    auto* block = new Block{ptr, nbytes, device, std::move(cpu)};
    record(block);
    return {ptr, block, &free_block, c10::Device(kNeuron, device)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

  bool initialized() override { return device_count() > 0; }
  void emptyCache(c10::MempoolId_t) override {}
  void recordStream(const c10::DataPtr&, c10::Stream) override {}

  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    check_device(device);
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_[device];
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check_device(device);
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceStats& s = stats_[device];
    for (auto* arr : {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
                      &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes,
                      &s.requested_bytes}) {
      for (auto& stat : *arr) stat.reset_accumulated();
    }
    s.num_alloc_retries = 0;
    s.num_ooms = 0;
    s.num_device_alloc = 0;
    s.num_device_free = 0;
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    check_device(device);
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceStats& s = stats_[device];
    for (auto* arr : {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
                      &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes,
                      &s.requested_bytes}) {
      for (auto& stat : *arr) stat.reset_peak();
    }
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    const int64_t capacity = hbm_capacity(device);
    std::lock_guard<std::mutex> lock(mutex_);
    const int64_t used = stats_[device].reserved_bytes[0].current;
    return {static_cast<size_t>(capacity - used), static_cast<size_t>(capacity)};
  }

  c10::DeviceIndex device_of(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    return it == live_.end() ? -1 : it->second;
  }

 private:
  // Charges `nbytes` to the core, or raises torch.OutOfMemoryError leaving
  // every existing allocation untouched.
  void reserve(c10::DeviceIndex device, size_t nbytes) {
    const int64_t capacity = hbm_capacity(device);
    mark_used(device);
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceStats& s = stats_[device];
    const int64_t in_use = s.reserved_bytes[0].current;
    if (in_use + static_cast<int64_t>(nbytes) > capacity) {
      s.num_ooms += 1;
      // The text names every setting that changes the outcome: a model that does not fit one core
      // is the usual cause, and the user must learn which setting to change without reading this file.
      TORCH_CHECK_WITH(
          OutOfMemoryError, false, "Neuron out of memory. Tried to allocate ",
          format_bytes(nbytes), " (", nbytes, " bytes) on neuron:", int(device), ". ",
          "The logical NeuronCore has ", format_bytes(capacity), " (", capacity,
          " bytes) of HBM and ", format_bytes(in_use), " (", in_use,
          " bytes) are in use by tensors. To make it fit: shard the model over more NeuronCores "
          "under torchrun (transformers DistributedConfig(tp_size, fsdp_size); TP_SIZE x FSDP_SIZE "
          "in the SFT example), use a smaller batch or max_length, use bfloat16, or free tensors "
          "(del + gc). The HBM per core follows TORCH_NEURONX_INSTANCE_TYPE and "
          "NEURON_LOGICAL_NC_CONFIG (LNC=2 gives a logical core two physical cores' HBM); "
          "TORCH_NEURONX_HBM_BYTES_PER_CORE overrides it.");
    }
    const size_t pool = nbytes < kSmallPoolLimit ? 1 : 2;
    for (size_t idx : {size_t(0), pool}) {
      s.allocation[idx].increase(1);
      s.segment[idx].increase(1);
      s.active[idx].increase(1);
      s.allocated_bytes[idx].increase(nbytes);
      s.reserved_bytes[idx].increase(nbytes);
      s.active_bytes[idx].increase(nbytes);
      s.requested_bytes[idx].increase(nbytes);
    }
    s.num_device_alloc += 1;
  }

  void unreserve(c10::DeviceIndex device, size_t nbytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    release_stats(device, nbytes);
  }

  void release_stats(c10::DeviceIndex device, size_t nbytes) {
    DeviceStats& s = stats_[device];
    const size_t pool = nbytes < kSmallPoolLimit ? 1 : 2;
    for (size_t idx : {size_t(0), pool}) {
      s.allocation[idx].decrease(1);
      s.segment[idx].decrease(1);
      s.active[idx].decrease(1);
      s.allocated_bytes[idx].decrease(nbytes);
      s.reserved_bytes[idx].decrease(nbytes);
      s.active_bytes[idx].decrease(nbytes);
      s.requested_bytes[idx].decrease(nbytes);
    }
    s.num_device_free += 1;
  }

  void record(Block* block) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_[block->ptr] = block->device;
  }

  static void free_block(void* ctx);

  std::mutex mutex_;
  std::array<DeviceStats, 128> stats_;
  std::unordered_map<const void*, c10::DeviceIndex> live_;

  friend void release_block(Block* block);
};

NeuronAllocator g_allocator;

void NeuronAllocator::free_block(void* ctx) {
  auto* block = static_cast<Block*>(ctx);
  if (block == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_allocator.mutex_);
    g_allocator.live_.erase(block->ptr);
    g_allocator.release_stats(block->device, block->size);
  }
  if (!block->cpu_owner) {
    c10::free_cpu(block->ptr);
  }
  delete block;  // drops cpu_owner, freeing adopted host bytes
}

// Pinned host memory: page-locked memory has no meaning for a host-backed
// device, but DataLoader and non_blocking copies ask whether a CPU tensor is
// pinned, so pinned allocations are tracked and reported as such.
class PinnedHostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    void* ptr = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    if (ptr) {
      std::lock_guard<std::mutex> lock(mutex_);
      pinned_.insert(ptr);
    }
    return {ptr, ptr, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
  bool contains(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    return pinned_.count(ptr) > 0;
  }

 private:
  static void free_pinned(void* ptr);
  std::mutex mutex_;
  std::unordered_set<const void*> pinned_;
};

PinnedHostAllocator g_pinned_allocator;

void PinnedHostAllocator::free_pinned(void* ptr) {
  if (!ptr) return;
  {
    std::lock_guard<std::mutex> lock(g_pinned_allocator.mutex_);
    g_pinned_allocator.pinned_.erase(ptr);
  }
  c10::free_cpu(ptr);
}

}  // namespace

REGISTER_ALLOCATOR(kNeuron, &g_allocator);

c10::DeviceAllocator* neuron_allocator() { return &g_allocator; }
c10::Allocator* pinned_host_allocator() { return &g_pinned_allocator; }
bool is_pinned_host_ptr(const void* ptr) { return g_pinned_allocator.contains(ptr); }
c10::DeviceIndex device_of_ptr(const void* ptr) { return g_allocator.device_of(ptr); }

c10::DataPtr adopt_cpu_storage(c10::Storage cpu, c10::DeviceIndex device) {
  return g_allocator.adopt(std::move(cpu), device);
}

}  // namespace torch_neuronx
