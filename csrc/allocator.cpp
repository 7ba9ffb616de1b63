// Device memory of the virtual NeuronCores: a caching segment allocator with
// TorchNeuron's documented semantics (and torch.cuda's statistics).
//
// - Segments are taken from the "runtime" (host memory here) and carved into
//   blocks. Requests under 1 MiB use the small pool (2 MiB segments), others
//   the large pool (20 MiB segments shared by requests under 10 MiB, an own
//   segment above), as CUDA's caching allocator does.
// - Requests under 16 MiB round up to a size class (minimum 256 B, four
//   classes per power of two); larger ones are only aligned to 256 B.
// - Freed blocks stay cached in their segment (merged with free neighbours)
//   for the next request; reserved >= allocated = active (no stream defers a
//   free on the virtual core).
// - The small pool's free blocks sit in size bins (four per power of two,
//   whose lower bounds are the size classes) with a bitmap of non-empty bins:
//   a tiny op's output is found, split and returned in O(1) with no
//   allocation, so allocation-heavy tiny ops cost no more than the allocator
//   before caching. The large pool keeps a best-fit ordered set (exact reuse of
//   big blocks matters more than the last nanosecond there).
// - HBM capacity is charged on reserved bytes. When a new segment does not fit,
//   the allocator returns wholly free cached segments and retries (counted in
//   num_alloc_retries) before raising torch.OutOfMemoryError; fragmentation in
//   partly used segments can still cause the OOM, as on the device.
// - Host kernels of neuron ops allocate their outputs through this allocator
//   (a CPU allocator that defers to it while a neuron op runs on the thread),
//   so eager op results are cached blocks too.
// - Cached bytes are bounded by a per-process limit and released when the host
//   runs low on memory, because device memory is host memory here.
#include "neuron_core.h"
#include "tools_core.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>
#include <c10/util/flat_hash_map.h>

#include <sys/mman.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace torch_neuronx {
namespace {

using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingAllocator::StatType;

constexpr size_t kMinBlockSize = 256;       // smallest block, alignment of every block
constexpr size_t kSegmentAlignment = 4096;   // host bytes of a segment start on a page
constexpr size_t kSmallSize = 1 << 20;      // requests below use the small pool
constexpr size_t kSmallBuffer = 2 << 20;    // small-pool segment
constexpr size_t kMinLargeAlloc = 10 << 20; // large requests below share a segment
constexpr size_t kLargeBuffer = 20 << 20;   // shared large-pool segment
constexpr size_t kRoundLimit = 16 << 20;    // size classes below, exact (aligned) above
constexpr size_t kDivisions = 4;            // size classes per power of two
constexpr int64_t kDefaultCacheLimit = 256LL << 20;
constexpr int kMaxDevices = kMaxNeuronCores;

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

size_t round_size(size_t n) {
  if (n <= kMinBlockSize) return kMinBlockSize;
  if (n >= kRoundLimit) return align_up(n, kMinBlockSize);
  const size_t pow2 = size_t(1) << (64 - __builtin_clzll(static_cast<unsigned long long>(n - 1)));  // >= n
  const size_t step = std::max(kMinBlockSize, (pow2 >> 1) / kDivisions);
  return align_up(n, step);
}

size_t segment_size(size_t rounded) {
  if (rounded < kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return rounded;
}

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

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

struct Segment;

struct Block {
  void* ptr;
  size_t size;
  size_t requested = 0;
  bool allocated = false;
  bool counted_inactive = false;  // counted in inactive_split
  // Taken by a host kernel and not (yet) a neuron tensor's storage: its segment is reserved, but it
  // is not counted as allocated (see HostKernelAllocator) until adoption makes it an op's result.
  bool scratch = false;
  Segment* segment;
  Block* prev = nullptr;  // neighbours in the segment, by address
  Block* next = nullptr;
  std::shared_ptr<c10::GatheredContext> context;
  // Small pool only, while free: the block's size bin and its list links.
  int bin = -1;
  Block* bin_prev = nullptr;
  Block* bin_next = nullptr;
};

// Size bins of the small pool: [2^k (1 + j/4), 2^k (1 + (j+1)/4)) for k >= 8.
// Every size class below 1 MiB is a bin's lower bound, so any block of the
// request's bin or a higher one holds the request.
constexpr int kSmallBins = 4 * (22 - 8);  // blocks up to a 2 MiB segment (k <= 21)
int small_bin(size_t size) {
  const int k = 63 - __builtin_clzll(static_cast<unsigned long long>(std::max(size, kMinBlockSize)));
  const int j = static_cast<int>((size >> (k - 2)) & 3);
  return std::min((k - 8) * 4 + j, kSmallBins - 1);
}
size_t small_bin_floor(int bin) {
  const size_t pow2 = size_t(1) << (bin / 4 + 8);
  return pow2 + (pow2 >> 2) * (bin % 4);
}

struct SmallFreeBins {
  std::array<Block*, kSmallBins> head{};
  uint64_t nonempty = 0;  // bit b: head[b] != nullptr
  size_t count = 0;

  void push(Block* b) {
    const int bin = small_bin(b->size);
    b->bin = bin;
    b->bin_prev = nullptr;
    b->bin_next = head[bin];
    if (head[bin] != nullptr) head[bin]->bin_prev = b;
    head[bin] = b;
    nonempty |= uint64_t(1) << bin;
    ++count;
  }
  void erase(Block* b) {
    if (b->bin_prev != nullptr) {
      b->bin_prev->bin_next = b->bin_next;
    } else {
      head[b->bin] = b->bin_next;
      if (b->bin_next == nullptr) nonempty &= ~(uint64_t(1) << b->bin);
    }
    if (b->bin_next != nullptr) b->bin_next->bin_prev = b->bin_prev;
    b->bin = -1;
    b->bin_prev = b->bin_next = nullptr;
    --count;
  }
  // A free block that holds `size` (the most recently freed of the smallest
  // fitting bin: warm in cache), or nullptr.
  Block* find(size_t size) const {
    int bin = small_bin(size);
    if (small_bin_floor(bin) < size) ++bin;  // only exact classes start at their own bin
    if (bin >= kSmallBins) return nullptr;
    const uint64_t fits = nonempty & (~uint64_t(0) << bin);
    return fits == 0 ? nullptr : head[__builtin_ctzll(fits)];
  }
  // Every free block (the caller may release the visited one).
  template <typename Fn>
  void for_each(Fn fn) {
    for (int bin = kSmallBins - 1; bin >= 0; --bin) {
      for (Block* b = head[bin]; b != nullptr;) {
        Block* next = b->bin_next;
        fn(b);
        b = next;
      }
    }
  }
};

struct Segment {
  void* base;
  size_t size;
  c10::DeviceIndex device;
  bool small;
  bool external;          // bytes owned by a host-kernel storage, freed with it
  c10::Storage cpu_owner;  // external only
  std::shared_ptr<c10::GatheredContext> context;
  bool direct = false;     // no-caching mode: one allocation, returned when freed
};

struct BlockLess {
  bool operator()(const Block* a, const Block* b) const {
    if (a->size != b->size) return a->size < b->size;
    return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
  }
};

struct TraceEntry {
  const char* action;
  uint64_t address;
  size_t size;
  int64_t time_us;
  std::shared_ptr<c10::GatheredContext> context;
};

struct DeviceState {
  DeviceStats stats;
  SmallFreeBins free_small;
  std::set<Block*, BlockLess> free_large;
  std::unordered_set<Segment*> segments;
  std::deque<TraceEntry> trace;
};

// A neuron DataPtr over a host-kernel result that already lives in a device
// block: keeps the CPU storage (and so the block) alive, counts nothing twice.
struct AdoptedRef {
  c10::Storage cpu;
};
void release_adopted(void* ctx) { delete static_cast<AdoptedRef*>(ctx); }

// Dry run (TORCH_NEURONX_DRY_RUN=1, read at the first segment; torch_neuronx.plan sets it
// before then): every segment keeps its bookkeeping (sizes, statistics, the HBM check and
// its OutOfMemoryError) but is backed by an anonymous MAP_NORESERVE mapping, so pages
// nobody writes cost no host memory and read as zeros. Decided once, so a process never
// mixes real and phantom segments.
bool phantom_segments() {
  static const bool on = [] {
    const char* v = std::getenv("TORCH_NEURONX_DRY_RUN");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}

std::mutex g_phantom_mutex;
std::unordered_map<void*, size_t> g_phantom_sizes;  // munmap needs the length

// Host bytes behind a new segment (c10::Error when the host cannot provide them).
void* segment_memory(size_t bytes) {
  if (!phantom_segments()) {
    // Page-aligned, as a device's segments are, so a large block starts on a page. With
    // c10::alloc_cpu's 64-byte alignment glibc returns its mmap chunks at page offset 64, and a
    // compiled decode step whose weights all started there ran ~1% slower than with page-aligned
    // weights (MKL's GEMV; per-call pairs against Inductor on CPU, benchmarks/compile_decoder.py).
    void* p = nullptr;
    TORCH_CHECK(posix_memalign(&p, kSegmentAlignment, bytes) == 0 && p != nullptr,
                "the host could not provide ", bytes, " bytes for a device segment");
    return p;   // freed by c10::free_cpu (free)
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  TORCH_CHECK(p != MAP_FAILED, "mmap of a phantom segment of ", bytes, " bytes failed");
  std::lock_guard<std::mutex> lock(g_phantom_mutex);
  g_phantom_sizes[p] = bytes;
  return p;
}

void release_segment_memory(void* p) {
  if (phantom_segments()) {
    size_t bytes = 0;
    {
      std::lock_guard<std::mutex> lock(g_phantom_mutex);
      auto it = g_phantom_sizes.find(p);
      if (it != g_phantom_sizes.end()) {
        bytes = it->second;
        g_phantom_sizes.erase(it);
      }
    }
    if (bytes > 0) {
      munmap(p, bytes);
      return;
    }
  }
  c10::free_cpu(p);
}

// Host memory available, from /proc/meminfo, read at most once a second.
bool host_under_pressure() {
  static std::atomic<int64_t> last_check_us{0};
  static std::atomic<bool> last_result{false};
  const int64_t now = now_us();
  if (now - last_check_us.load(std::memory_order_relaxed) < 1000000) return last_result.load();
  last_check_us.store(now);
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return false;
  long long total = 0, available = -1;
  char key[64];
  long long value;
  while (std::fscanf(f, "%63s %lld kB\n", key, &value) == 2) {
    if (std::strcmp(key, "MemTotal:") == 0) total = value;
    if (std::strcmp(key, "MemAvailable:") == 0) available = value;
  }
  std::fclose(f);
  // Under 5% of the host (or 512 MiB) available: cached device memory goes back.
  const bool pressure = available >= 0 && available < std::max(total / 20, 512LL * 1024);
  last_result.store(pressure);
  return pressure;
}

class NeuronAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::DeviceIndex device = current_device();
    Block* block = allocate_block(device, nbytes);
    return {block ? block->ptr : nullptr, block, &free_block, c10::Device(kNeuron, device)};
  }

  // A block of `nbytes` on the core (nullptr for 0 bytes); raises
  // torch.OutOfMemoryError when the core's HBM cannot hold a new segment.
  // `scratch`: a host kernel's allocation, counted only if adopted (claim_scratch).
  //
  // The common case (caching on, no memory history, a cached block fits) is this short
  // path; everything else is allocate_block_general, out of line. Why it matters: between
  // two ops of a compiled decode step the GEMV streams megabytes of weights through the
  // host's L2, so every cache line of code an allocation executes is fetched again each
  // time (callgrind, 1 MiB L2 model: allocate_block was the largest source of extra
  // instruction misses over Inductor on CPU, 16 lines per call).
  Block* allocate_block(c10::DeviceIndex device, size_t nbytes, bool scratch = false) {
    check_device(device);
    check_not_in_bad_fork();
    if (nbytes == 0) return nullptr;
    if (C10_LIKELY(context_fn_.load(std::memory_order_relaxed) == nullptr &&
                   !no_caching_.load(std::memory_order_relaxed))) {
      const size_t size = round_size(nbytes);
      std::lock_guard<std::mutex> lock(mutex_);
      if (C10_LIKELY(used_[device] && !record_trace_)) {
        DeviceState& st = state_[device];
        Block* block = take_free(st, size < kSmallSize, size);
        if (C10_LIKELY(block != nullptr)) {
          block = split(st, block, size);
          block->allocated = true;
          block->requested = nbytes;
          block->scratch = scratch;
          if (scratch) {
            count_cached(block, +1);
          } else {
            count_alloc(device, st, block, +1);
          }
          live_[block->ptr] = block;
          return block;
        }
      }
    }
    return allocate_block_general(device, nbytes, scratch);
  }

 private:
  // Every case of allocate_block: a new segment (HBM check, OutOfMemoryError), memory
  // history (context and trace), the no-caching mode, a core's first allocation.
  C10_NOINLINE Block* allocate_block_general(c10::DeviceIndex device, size_t nbytes, bool scratch) {
    std::shared_ptr<c10::GatheredContext> context;
    if (ContextFn fn = context_fn_.load(std::memory_order_relaxed)) context = fn();  // before the lock (takes the GIL)
    const bool direct = no_caching_.load(std::memory_order_relaxed);
    const size_t size = direct ? nbytes : round_size(nbytes);
    std::vector<void*> to_free;
    Block* block = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      first_use(device);
      DeviceState& st = state_[device];
      const bool small = size < kSmallSize;
      block = direct ? nullptr : take_free(st, small, size);
      if (block == nullptr) {  // slow path: a new segment, charged to the core's HBM
        const int64_t capacity = hbm_capacity(device);  // a leaf lock, never held while taking ours
        block = new_segment(device, st, small, size, nbytes, capacity, context, to_free, direct);
      }
      block = split(st, block, size);
      block->allocated = true;
      block->requested = nbytes;
      block->context = std::move(context);
      block->scratch = scratch;
      if (scratch) {
        count_cached(block, +1);
      } else {
        count_alloc(device, st, block, +1);
        trace(st, "alloc", block->ptr, block->size, block->context);
      }
      live_[block->ptr] = block;
    }
    for (void* p : to_free) release_segment_memory(p);
    return block;
  }

 public:
  c10::DataPtr adopt(c10::Storage cpu, c10::DeviceIndex device) {
    const size_t nbytes = cpu.nbytes();
    void* ptr = cpu.mutable_data();
    const c10::Device where(kNeuron, device);
    if (nbytes == 0 || ptr == nullptr) return {nullptr, nullptr, &free_block, where};
    if (cpu.data_ptr().get_deleter() == &free_host_ptr) {
      // The host kernel allocated it here already: counted from now, once, as a block.
      claim_scratch(ptr);
      return {ptr, new AdoptedRef{std::move(cpu)}, &release_adopted, where};
    }
    // Bytes from elsewhere (a kernel's worker thread, a raw CPU allocation):
    // an own segment, released with its storage.
    std::shared_ptr<c10::GatheredContext> context;
    if (ContextFn fn = context_fn_.load(std::memory_order_relaxed)) context = fn();
    const int64_t capacity = hbm_capacity(device);
    std::vector<void*> to_free;
    Block* block;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      first_use(device);
      DeviceState& st = state_[device];
      const bool small = nbytes < kSmallSize;
      ensure_capacity(device, st, nbytes, nbytes, capacity, to_free);
      auto* seg = new Segment{ptr, nbytes, device, small, true, std::move(cpu), context};
      block = new_block(ptr, nbytes);
      block->segment = seg;
      block->allocated = true;
      block->requested = nbytes;
      block->context = context;
      count_segment(device, st, seg, +1);
      count_alloc(device, st, block, +1);
      st.segments.insert(seg);
      live_[ptr] = block;
      trace(st, "segment_alloc", ptr, nbytes, context);
      trace(st, "alloc", ptr, nbytes, context);
    }
    for (void* p : to_free) release_segment_memory(p);
    return {ptr, block, &free_block, where};
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

  bool initialized() override { return device_count() > 0; }

  void emptyCache(c10::MempoolId_t) override {
    std::vector<void*> to_free;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (int d = 0; d < kMaxDevices; ++d) {
        if (!state_[d].segments.empty()) release_cached(d, state_[d], to_free);
      }
    }
    for (void* p : to_free) release_segment_memory(p);
  }

  void recordStream(const c10::DataPtr&, c10::Stream) override {}

  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    check_device(device);
    std::lock_guard<std::mutex> lock(mutex_);
    return state_[device].stats;
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check_device(device);
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceStats& s = state_[device].stats;
    for (auto* arr : all_stats(s)) {
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
    DeviceStats& s = state_[device].stats;
    for (auto* arr : all_stats(s)) {
      for (auto& stat : *arr) stat.reset_peak();
    }
    publish(device, s);
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    const int64_t capacity = hbm_capacity(device);
    std::lock_guard<std::mutex> lock(mutex_);
    const int64_t used = state_[device].stats.reserved_bytes[0].current;
    return {static_cast<size_t>(capacity - used), static_cast<size_t>(capacity)};
  }

  c10::DeviceIndex device_of(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    return it == live_.end() ? -1 : it->second->segment->device;
  }

  void record_history(bool enabled, bool record_trace, size_t max_entries, ContextFn fn) {
    std::lock_guard<std::mutex> lock(mutex_);
    context_fn_.store(enabled ? fn : nullptr);
    record_trace_ = enabled && record_trace;
    max_entries_ = std::max<size_t>(max_entries, 1);
    if (!enabled) {
      for (auto& st : state_) st.trace.clear();
    }
  }

  AllocatorSnapshot snapshot() {
    AllocatorSnapshot out;
    std::lock_guard<std::mutex> lock(mutex_);
    out.recording = context_fn_.load() != nullptr || record_trace_;
    int last_device = -1;
    for (int d = 0; d < kMaxDevices; ++d) {
      const DeviceState& st = state_[d];
      if (!st.segments.empty() || !st.trace.empty()) last_device = d;
      for (Segment* seg : st.segments) {
        SnapshotSegment s{d, reinterpret_cast<uint64_t>(seg->base), seg->size, seg->small, seg->external, {}, seg->context};
        Block* b = first_block(seg);
        for (; b != nullptr; b = b->next) {
          s.blocks.push_back({reinterpret_cast<uint64_t>(b->ptr), b->size, b->requested, b->allocated, b->context});
        }
        out.segments.push_back(std::move(s));
      }
    }
    out.traces.resize(last_device + 1);
    for (int d = 0; d <= last_device; ++d) {
      for (const TraceEntry& e : state_[d].trace) {
        out.traces[d].push_back({e.action, e.address, e.size, e.time_us, e.context});
      }
    }
    return out;
  }

  void set_cache_limit(int64_t bytes) { cache_limit_.store(bytes); }
  void set_no_caching(bool on) { no_caching_.store(on); }
  bool no_caching() const { return no_caching_.load(std::memory_order_relaxed); }
  int64_t cache_limit() const { return cache_limit_.load(); }
  int64_t cached_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_total_;
  }

  static void free_block(void* ctx);
  // Deleter of host-kernel allocations (context == pointer, so the CPU
  // allocator's raw API stays valid); pointers that are not blocks go to `other`.
  static void free_host_ptr(void* ptr);
  static bool free_if_block(void* ptr);

 private:
  static std::array<std::array<c10::CachingAllocator::Stat, 3>*, 9> all_stats(DeviceStats& s) {
    return {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
            &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes};
  }

  static size_t pool_index(bool small) {
    return static_cast<size_t>(small ? StatType::SMALL_POOL : StatType::LARGE_POOL);
  }

  void first_use(c10::DeviceIndex device) {
    if (C10_UNLIKELY(!used_[device])) {
      used_[device] = true;
      mark_used(device);
      stats_first_use(device);
    }
  }

  static Block* first_block(Segment* seg);

  // A cached block that holds `size` (large pool: the smallest, lowest
  // address first), removed from its free set.
  Block* take_free(DeviceState& st, bool small, size_t size) {
    Block* b = nullptr;
    if (small) {
      b = st.free_small.find(size);
    } else {
      Block key{nullptr, size};
      auto it = st.free_large.lower_bound(&key);
      if (it != st.free_large.end()) b = *it;
    }
    if (b != nullptr) erase_free(st, b);
    return b;
  }

  // Every free block of one pool (the visited block may be released).
  template <typename Fn>
  void for_each_free(DeviceState& st, bool small, Fn fn) {
    if (small) {
      st.free_small.for_each(fn);
      return;
    }
    for (auto it = st.free_large.begin(); it != st.free_large.end();) {
      Block* b = *it;
      ++it;
      fn(b);
    }
  }

  void insert_free(DeviceState& st, Block* b) {
    if (b->segment->small) {
      st.free_small.push(b);
    } else {
      st.free_large.insert(b);
    }
    if (b->prev != nullptr || b->next != nullptr) {  // a free piece of a split segment
      b->counted_inactive = true;
      for (size_t idx : {size_t(0), pool_index(b->segment->small)}) {
        st.stats.inactive_split[idx].increase(1);
        st.stats.inactive_split_bytes[idx].increase(b->size);
      }
    }
  }

  void erase_free(DeviceState& st, Block* b) {
    if (b->segment->small) {
      st.free_small.erase(b);
    } else {
      st.free_large.erase(b);
    }
    if (b->counted_inactive) {
      b->counted_inactive = false;
      for (size_t idx : {size_t(0), pool_index(b->segment->small)}) {
        st.stats.inactive_split[idx].decrease(1);
        st.stats.inactive_split_bytes[idx].decrease(b->size);
      }
    }
  }

  // Keeps `size` bytes of `b` and returns the rest to the free set.
  Block* split(DeviceState& st, Block* b, size_t size) {
    const size_t remaining = b->size - size;
    const bool small = b->segment->small;
    if (b->segment->external || b->segment->direct ||
        (small ? remaining < kMinBlockSize : remaining <= kSmallSize)) {
      return b;
    }
    Block* rest = new_block(static_cast<char*>(b->ptr) + size, remaining);
    rest->segment = b->segment;
    rest->prev = b;
    rest->next = b->next;
    if (b->next != nullptr) b->next->prev = rest;
    b->next = rest;
    b->size = size;
    insert_free(st, rest);
    return b;
  }

  // Charges a new segment to the core's HBM or raises torch.OutOfMemoryError,
  // leaving every existing allocation untouched.
  void ensure_capacity(c10::DeviceIndex device, DeviceState& st, size_t segment_bytes, size_t nbytes,
                       int64_t capacity, std::vector<void*>& to_free) {
    DeviceStats& s = st.stats;
    auto fits = [&] { return s.reserved_bytes[0].current + static_cast<int64_t>(segment_bytes) <= capacity; };
    if (fits()) return;
    if (cached_on(st) > 0) {  // as CUDA: return wholly free segments, then retry
      s.num_alloc_retries += 1;
      release_cached(device, st, to_free);
      if (fits()) return;
    }
    s.num_ooms += 1;
    trace(st, "oom", nullptr, nbytes, nullptr);
    const int64_t allocated = s.allocated_bytes[0].current;
    const int64_t requested = s.requested_bytes[0].current;
    const int64_t reserved = s.reserved_bytes[0].current;
    // The text names every setting that changes the outcome: a model that does not fit one core
    // is the usual cause, and the user must learn which setting to change without reading this file.
    TORCH_CHECK_WITH(
        OutOfMemoryError, false, "Neuron out of memory. Tried to allocate ", format_bytes(nbytes),
        " (", nbytes, " bytes) on neuron:", int(device), ". ", "The logical NeuronCore has ",
        format_bytes(capacity), " (", capacity, " bytes) of HBM; ", format_bytes(allocated), " (",
        allocated, " bytes, ", requested, " bytes requested) are allocated to tensors, ",
        format_bytes(reserved), " (", reserved, " bytes) are reserved by the caching allocator, of which ",
        format_bytes(reserved - allocated), " (", reserved - allocated,
        " bytes) are free but cached in partly used segments (fragmentation; wholly free cached "
        "segments were already returned, as torch.neuron.empty_cache() does). To make it fit: shard "
        "the model over more NeuronCores under torchrun (transformers DistributedConfig(tp_size, "
        "fsdp_size); TP_SIZE x FSDP_SIZE in the SFT example), use a smaller batch or max_length, use "
        "bfloat16, or free tensors (del + gc); if the free-but-cached part is large, allocate large "
        "tensors before small ones or free the tensors that pin those segments. The HBM per core "
        "follows TORCH_NEURONX_INSTANCE_TYPE and NEURON_LOGICAL_NC_CONFIG (LNC=2 gives a logical "
        "core two physical cores' HBM); TORCH_NEURONX_HBM_BYTES_PER_CORE overrides it.");
  }

  Block* new_segment(c10::DeviceIndex device, DeviceState& st, bool small, size_t size, size_t nbytes,
                     int64_t capacity, const std::shared_ptr<c10::GatheredContext>& context,
                     std::vector<void*>& to_free, bool direct) {
    size_t bytes = direct ? size : segment_size(size);
    // A shared segment that no longer fits the core: an exact one may still.
    if (bytes > size && st.stats.reserved_bytes[0].current + static_cast<int64_t>(bytes) > capacity) {
      bytes = size;
    }
    ensure_capacity(device, st, bytes, nbytes, capacity, to_free);
    if (cached_total_ > 0 && host_under_pressure()) release_all_cached(to_free);
    void* ptr = nullptr;
    try {
      ptr = segment_memory(bytes);
    } catch (const c10::Error&) {
      release_all_cached(to_free);
      for (void* p : to_free) release_segment_memory(p);
      to_free.clear();
      try {
        ptr = segment_memory(bytes);
      } catch (const c10::Error&) {
        TORCH_CHECK_WITH(OutOfMemoryError, false, "Neuron out of memory: the host could not back ",
                         format_bytes(bytes), " for neuron:", int(device),
                         " (device memory of the virtual NeuronCore is host memory).");
      }
    }
    auto* seg = new Segment{ptr, bytes, device, small, false, {}, context};
    seg->direct = direct;
    Block* block = new_block(ptr, bytes);
    block->segment = seg;
    st.segments.insert(seg);
    count_segment(device, st, seg, +1);
    trace(st, "segment_alloc", ptr, bytes, context);
    return block;
  }

  // Frees every wholly free segment of the device (host bytes freed by the caller).
  void release_cached(c10::DeviceIndex device, DeviceState& st, std::vector<void*>& to_free) {
    for (bool small : {true, false}) {
      for_each_free(st, small, [&](Block* b) {
        if (b->prev == nullptr && b->next == nullptr) release_segment(device, st, b, to_free);
      });
    }
  }

  void release_all_cached(std::vector<void*>& to_free) {
    for (int d = 0; d < kMaxDevices; ++d) {
      if (!state_[d].segments.empty()) release_cached(d, state_[d], to_free);
    }
  }

  // Over the cache limit: return wholly free segments, largest first.
  C10_NOINLINE void enforce_cache_limit(std::vector<void*>& to_free) {
    const int64_t limit = cache_limit_.load(std::memory_order_relaxed);
    if (cached_total_ <= limit) return;
    for (int d = 0; d < kMaxDevices && cached_total_ > limit; ++d) {
      DeviceState& st = state_[d];
      for (auto it = st.free_large.rbegin(); it != st.free_large.rend() && cached_total_ > limit;) {
        Block* b = *it;
        ++it;
        if (b->prev == nullptr && b->next == nullptr) {
          release_segment(d, st, b, to_free);
          it = st.free_large.rbegin();  // the set changed
        }
      }
      st.free_small.for_each([&](Block* b) {  // bins from the largest down
        if (cached_total_ > limit && b->prev == nullptr && b->next == nullptr) release_segment(d, st, b, to_free);
      });
    }
  }

  void release_segment(c10::DeviceIndex device, DeviceState& st, Block* b, std::vector<void*>& to_free) {
    erase_free(st, b);
    Segment* seg = b->segment;
    trace(st, "segment_free", seg->base, seg->size, nullptr);
    count_segment(device, st, seg, -1);
    st.segments.erase(seg);
    to_free.push_back(seg->base);
    delete_block(b);
    delete seg;
  }

  int64_t cached_on(DeviceState& st) {
    return st.stats.reserved_bytes[0].current - st.stats.allocated_bytes[0].current;
  }

  void count_segment(c10::DeviceIndex device, DeviceState& st, Segment* seg, int sign) {
    DeviceStats& s = st.stats;
    for (size_t idx : {size_t(0), pool_index(seg->small)}) {
      if (sign > 0) {
        s.segment[idx].increase(1);
        s.reserved_bytes[idx].increase(seg->size);
      } else {
        s.segment[idx].decrease(1);
        s.reserved_bytes[idx].decrease(seg->size);
      }
    }
    if (sign > 0) {
      s.num_device_alloc += 1;
      if (!seg->external) cached_total_ += seg->size;
    } else {
      s.num_device_free += 1;
      if (!seg->external) cached_total_ -= seg->size;
    }
    publish(device, s);
  }

  // A host kernel's block becomes an op's result: from now on it is allocated memory (stats, peak,
  // memory history). Host kernels' other allocations (a CPU kernel's scratch: fp32 copies of bf16
  // matmul inputs, reduction buffers) are never counted: they depend on the host CPU's kernels, and
  // a NeuronCore has no such HBM traffic; a dry run, which runs no host kernel, never sees them.
 public:
  void claim_scratch(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end() || !it->second->scratch) return;
    Block* b = it->second;
    b->scratch = false;
    const c10::DeviceIndex device = b->segment->device;
    DeviceState& st = state_[device];
    count_cached(b, -1);   // count_alloc takes it out of the cached total again
    count_alloc(device, st, b, +1);
    trace(st, "alloc", b->ptr, b->size, b->context);
  }

 private:
  // reserved - allocated of own segments, which the cache limit reads: a scratch block is in use.
  void count_cached(Block* b, int sign) {
    if (!b->segment->external) cached_total_ -= sign * static_cast<int64_t>(b->size);
  }

  void count_alloc(c10::DeviceIndex device, DeviceState& st, Block* b, int sign) {
    DeviceStats& s = st.stats;
    for (size_t idx : {size_t(0), pool_index(b->segment->small)}) {
      if (sign > 0) {
        s.allocation[idx].increase(1);
        s.active[idx].increase(1);
        s.allocated_bytes[idx].increase(b->size);
        s.active_bytes[idx].increase(b->size);
        s.requested_bytes[idx].increase(b->requested);
      } else {
        s.allocation[idx].decrease(1);
        s.active[idx].decrease(1);
        s.allocated_bytes[idx].decrease(b->size);
        s.active_bytes[idx].decrease(b->size);
        s.requested_bytes[idx].decrease(b->requested);
      }
    }
    if (!b->segment->external) cached_total_ -= sign * static_cast<int64_t>(b->size);
    publish(device, s);
  }

  static void publish(c10::DeviceIndex device, const DeviceStats& s) {
    stats_store(device, kAllocated, s.allocated_bytes[0].current);
    stats_store(device, kAllocatedPeak, s.allocated_bytes[0].peak);
    stats_store(device, kReserved, s.reserved_bytes[0].current);
    stats_store(device, kReservedPeak, s.reserved_bytes[0].peak);
  }

  void trace(DeviceState& st, const char* action, void* ptr, size_t size,
             const std::shared_ptr<c10::GatheredContext>& context) {
    if (!record_trace_) return;
    st.trace.push_back({action, reinterpret_cast<uint64_t>(ptr), size, now_us(), context});
    while (st.trace.size() > max_entries_) st.trace.pop_front();
  }

  // Under the lock: the block returns to its segment's free space. The common case
  // (a cached segment's block, no memory history, under the cache limit) is this short
  // path, for the same reason as allocate_block's; the rest is release_general.
  void release(Block* block, std::vector<void*>& to_free, c10::Storage& owner) {
    Segment* seg = block->segment;
    if (C10_UNLIKELY(seg->external || seg->direct || record_trace_ || block->context)) {
      release_general(block, to_free, owner);
      return;
    }
    live_.erase(block->ptr);
    DeviceState& st = state_[seg->device];
    if (block->scratch) {
      count_cached(block, -1);
      block->scratch = false;
    } else {
      count_alloc(seg->device, st, block, -1);
    }
    block->allocated = false;
    block->requested = 0;
    merge_free_neighbours(st, block);
    insert_free(st, block);
    if (C10_UNLIKELY(cached_total_ > cache_limit_.load(std::memory_order_relaxed))) enforce_cache_limit(to_free);
  }

  // A freed block absorbs its free neighbours in the segment.
  void merge_free_neighbours(DeviceState& st, Block* block) {
    for (Block* neighbour : {block->prev, block->next}) {
      if (neighbour == nullptr || neighbour->allocated) continue;
      erase_free(st, neighbour);
      if (neighbour == block->prev) {
        block->ptr = neighbour->ptr;
        block->prev = neighbour->prev;
        if (block->prev) block->prev->next = block;
      } else {
        block->next = neighbour->next;
        if (block->next) block->next->prev = block;
      }
      block->size += neighbour->size;
      delete_block(neighbour);
    }
  }

  C10_NOINLINE void release_general(Block* block, std::vector<void*>& to_free, c10::Storage& owner) {
    Segment* seg = block->segment;
    const c10::DeviceIndex device = seg->device;
    DeviceState& st = state_[device];
    live_.erase(block->ptr);
    if (block->scratch) {
      count_cached(block, -1);
      block->scratch = false;
    } else {
      trace(st, "free_requested", block->ptr, block->size, block->context);
      trace(st, "free_completed", block->ptr, block->size, block->context);
      count_alloc(device, st, block, -1);
    }
    block->allocated = false;
    block->requested = 0;
    block->context.reset();
    if (seg->external) {
      trace(st, "segment_free", seg->base, seg->size, nullptr);
      count_segment(device, st, seg, -1);
      st.segments.erase(seg);
      owner = std::move(seg->cpu_owner);  // dropped by the caller, outside the lock
      delete_block(block);
      delete seg;
      return;
    }
    merge_free_neighbours(st, block);
    insert_free(st, block);
    if (seg->direct) {
      release_segment(device, st, block, to_free);
      return;
    }
    enforce_cache_limit(to_free);
  }

  // Block objects are recycled (under the lock): splitting and merging on the
  // tiny-op path then never calls the host allocator.
  Block* new_block(void* ptr, size_t size) {
    if (spare_blocks_.empty()) return new Block{ptr, size};
    Block* b = spare_blocks_.back();
    spare_blocks_.pop_back();
    *b = Block{ptr, size};
    return b;
  }
  void delete_block(Block* b) {
    if (spare_blocks_.size() >= 4096) {
      delete b;
      return;
    }
    b->context.reset();
    spare_blocks_.push_back(b);
  }

  std::mutex mutex_;
  std::array<DeviceState, kMaxDevices> state_;
  std::array<bool, kMaxDevices> used_{};
  ska::flat_hash_map<const void*, Block*> live_;  // open addressing: no node allocation per block
  std::vector<Block*> spare_blocks_;
  int64_t cached_total_ = 0;  // reserved - allocated over all devices (own segments)
  std::atomic<int64_t> cache_limit_{kDefaultCacheLimit};
  std::atomic<ContextFn> context_fn_{nullptr};
  std::atomic<bool> no_caching_{false};  // TORCH_NEURONX_NO_MEMORY_CACHING: the pre-cache allocator
  bool record_trace_ = false;
  size_t max_entries_ = 100000;
};

NeuronAllocator g_allocator;

Block* NeuronAllocator::first_block(Segment* seg) {
  // Segments do not keep their head block; find it through the live map or
  // the free sets (snapshot only, under the lock).
  for (auto& [ptr, b] : g_allocator.live_) {
    if (b->segment == seg) {
      Block* head = b;
      while (head->prev) head = head->prev;
      return head;
    }
  }
  DeviceState& st = g_allocator.state_[seg->device];
  Block* found = nullptr;
  for (bool small : {true, false}) {
    g_allocator.for_each_free(st, small, [&](Block* b) {
      if (found == nullptr && b->segment == seg) found = b;
    });
  }
  while (found != nullptr && found->prev != nullptr) found = found->prev;
  return found;
}

void NeuronAllocator::free_block(void* ctx) {
  auto* block = static_cast<Block*>(ctx);
  if (block == nullptr) return;
  std::vector<void*> to_free;
  c10::Storage owner;
  {
    std::lock_guard<std::mutex> lock(g_allocator.mutex_);
    g_allocator.release(block, to_free, owner);
  }
  for (void* p : to_free) release_segment_memory(p);
  // `owner` (an external segment's CPU storage) is released here, unlocked.
}

bool NeuronAllocator::free_if_block(void* ptr) {
  std::vector<void*> to_free;
  c10::Storage owner;
  {
    std::lock_guard<std::mutex> lock(g_allocator.mutex_);
    auto it = g_allocator.live_.find(ptr);
    if (it == g_allocator.live_.end()) return false;
    g_allocator.release(it->second, to_free, owner);
  }
  for (void* p : to_free) release_segment_memory(p);
  return true;
}

c10::DeleterFnPtr g_cpu_raw_deleter = nullptr;

void NeuronAllocator::free_host_ptr(void* ptr) {
  if (ptr == nullptr || free_if_block(ptr)) return;
  if (g_cpu_raw_deleter != nullptr) g_cpu_raw_deleter(ptr);
}

// The CPU allocator while a neuron op's host kernel runs on this thread: its
// allocations (the op's outputs and scratch) come from that core's device
// memory. Everywhere else it is the CPU allocator it replaced.
class HostKernelAllocator final : public c10::Allocator {
 public:
  explicit HostKernelAllocator(c10::Allocator* cpu) : cpu_(cpu) {
    g_cpu_raw_deleter = cpu->raw_deleter();
  }
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::DeviceIndex device = host_kernel_device();
    // Only where the CPU allocator's raw API is valid (its deleter frees a
    // bare pointer) can both kinds of pointer share one deleter.
    if (device < 0 || g_cpu_raw_deleter == nullptr || in_bad_fork() || g_allocator.no_caching()) {
      return cpu_->allocate(nbytes);
    }
    Block* block = g_allocator.allocate_block(device, nbytes, /*scratch=*/true);
    void* ptr = block ? block->ptr : nullptr;
    return {ptr, ptr, &NeuronAllocator::free_host_ptr, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override {
    return g_cpu_raw_deleter ? &NeuronAllocator::free_host_ptr : nullptr;
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

 private:
  c10::Allocator* cpu_;
};

struct HostKernelAllocatorRegistration {
  HostKernelAllocatorRegistration() {
    static HostKernelAllocator wrapper(c10::GetCPUAllocator());
    c10::SetCPUAllocator(&wrapper, /*priority=*/1);
  }
} g_host_kernel_allocator_registration;

}  // namespace

REGISTER_ALLOCATOR(kNeuron, &g_allocator);

c10::DeviceAllocator* neuron_allocator() { return &g_allocator; }
c10::DeviceIndex device_of_ptr(const void* ptr) { return g_allocator.device_of(ptr); }

c10::DataPtr allocate_host_block(c10::DeviceIndex device, size_t nbytes) {
  // Counted from the start (not scratch): a compiled graph's buffer is device memory in use, as the
  // neuron tensors it replaces were. Freed through free_host_ptr like a host kernel's block, and made
  // neuron memory in place (adopt_cpu_storage_in_place) when the graph returns it.
  Block* block = g_allocator.allocate_block(device, nbytes, /*scratch=*/false);
  void* ptr = block ? block->ptr : nullptr;
  return {ptr, ptr, &NeuronAllocator::free_host_ptr, c10::Device(c10::DeviceType::CPU)};
}

c10::DataPtr adopt_cpu_storage(c10::Storage cpu, c10::DeviceIndex device) {
  return g_allocator.adopt(std::move(cpu), device);
}

bool adopt_cpu_storage_in_place(c10::StorageImpl* cpu, c10::DeviceIndex device) {
  // Only bytes the host kernel took from a device block (counted there once);
  // anything else is adopted as its own segment by adopt_cpu_storage.
  const c10::DataPtr& data = cpu->data_ptr();
  if (cpu->nbytes() == 0 || data.get() == nullptr ||
      data.get_deleter() != &NeuronAllocator::free_host_ptr) {
    return false;
  }
  g_allocator.claim_scratch(data.get());
  cpu->_mutable_data_ptr_no_checks().unsafe_set_device(c10::Device(kNeuron, device));
  cpu->set_allocator(&g_allocator);  // growing it (resize_) allocates on the core
  return true;
}

void record_memory_history(bool enabled, bool record_trace, size_t max_entries, ContextFn fn) {
  g_allocator.record_history(enabled, record_trace, max_entries, fn);
}
AllocatorSnapshot allocator_snapshot() { return g_allocator.snapshot(); }
void set_allocator_cache_limit(int64_t bytes) { g_allocator.set_cache_limit(bytes); }
void set_allocator_no_caching(bool on) { g_allocator.set_no_caching(on); }
int64_t allocator_cache_limit() { return g_allocator.cache_limit(); }
bool allocator_phantom() { return phantom_segments(); }
int64_t allocator_cached_bytes() { return g_allocator.cached_bytes(); }

}  // namespace torch_neuronx
