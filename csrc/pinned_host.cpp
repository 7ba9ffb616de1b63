// Pinned host memory: page-locked memory has no meaning for a host-backed
// device, but DataLoader and non_blocking copies ask whether a CPU tensor is
// pinned, so pinned blocks are tracked and reported as such.
//
// Blocks are kept as address ranges, not start pointers: a tensor whose
// storage is an interior slice of a pinned block (a storage slice, a
// from_blob view, a buffer shared with numpy) is pinned too, as on CUDA.
#include "pinned_host.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>

namespace torch_neuronx {
namespace {

class PinnedBlockAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    void* ptr = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    if (ptr) {
      std::lock_guard<std::mutex> lock(mutex_);
      blocks_[reinterpret_cast<uintptr_t>(ptr)] = nbytes;
    }
    return {ptr, ptr, &free_block, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_block; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

  bool contains(const void* ptr) {
    if (ptr == nullptr) return false;
    const auto address = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.upper_bound(address);  // first block starting after ptr
    if (it == blocks_.begin()) return false;
    --it;
    return address < it->first + it->second;
  }

 private:
  static void free_block(void* ptr);
  std::mutex mutex_;
  std::map<uintptr_t, size_t> blocks_;  // start -> size
};

PinnedBlockAllocator g_pinned_blocks;

void PinnedBlockAllocator::free_block(void* ptr) {
  if (!ptr) return;
  {
    std::lock_guard<std::mutex> lock(g_pinned_blocks.mutex_);
    g_pinned_blocks.blocks_.erase(reinterpret_cast<uintptr_t>(ptr));
  }
  c10::free_cpu(ptr);
}

}  // namespace

c10::Allocator* pinned_block_allocator() { return &g_pinned_blocks; }
bool is_in_pinned_block(const void* ptr) { return g_pinned_blocks.contains(ptr); }

}  // namespace torch_neuronx
