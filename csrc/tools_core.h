// What the Neuron tools read from the core: op tracking, the per-process stats
// page that neuron-ls / neuron-top / neuron-monitor read, and memory snapshots.
//
// Hot paths (every op, every allocation) only do relaxed atomic stores and
// adds into memory that is already mapped: no locks, no system calls.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/CachingDeviceAllocator.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace torch_neuronx {

// ---- op tracking (op_tracking.cpp) ------------------------------------------
// One counter per ATen operator that ran on the virtual core.
struct OpSlot;
OpSlot* op_slot(const c10::OperatorHandle& op);  // lock-free lookup, inserts once
OpSlot* named_op_slot(const char* name);          // for explicit kernels (static slots)

// Counts one execution of an op on `device` and adds its wall time to the
// core's busy time (outermost op of the thread only: nested calls are not
// counted twice). Also routes host-kernel allocations to the device allocator.
class OpScope {
 public:
  OpScope(OpSlot* slot, c10::DeviceIndex device);
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  OpSlot* slot_;
  c10::DeviceIndex device_;
  c10::DeviceIndex previous_host_device_;
  int64_t start_ns_;
  bool outermost_;
};

struct OpCount {
  std::string name;  // "aten::add.Tensor"
  int64_t count;
};
std::vector<OpCount> op_counts();
double measure_op_scope_ns(int64_t iterations);  // benchmark of the per-op publishing cost
void clear_op_tracking();

// While a host kernel of a neuron op runs on this thread, the device whose
// allocator backs its CPU allocations (-1 outside).
c10::DeviceIndex host_kernel_device();

// ---- stats page (stats_page.cpp) ------------------------------------------
// Layout shared with torch_neuronx/tools/api/registry.py (the one reader).
constexpr uint64_t kStatsMagic = 0x3154415453524e4eULL;  // "NNRSTAT1" little-endian
constexpr uint32_t kStatsVersion = 1;
constexpr size_t kStatsMetaOffset = 64;
constexpr size_t kStatsMetaSize = 4096 - 64;
constexpr size_t kStatsDeviceOffset = 4096;
constexpr size_t kStatsDeviceStride = 128;
constexpr size_t kStatsMaxDevices = 128;
constexpr size_t kStatsPageBytes = kStatsDeviceOffset + kStatsDeviceStride * kStatsMaxDevices;

// Per logical core, int64 fields in this order (see registry.py DEVICE_FIELDS).
enum StatsField : int {
  kUsed = 0,             // 1 once the process touched the core
  kAllocated,            // bytes allocated to tensors
  kAllocatedPeak,
  kReserved,             // bytes held in segments (charged to HBM)
  kReservedPeak,
  kBusyNs,               // wall time the core spent executing ops
  kOps,                  // ops executed
  kGraphs,               // compiled graphs executed (written from Python)
  kEstimatedFlops,       // estimated FLOPs executed (written by the cost model when on)
  kNumFields
};

// Sets where the page lives and its metadata (JSON, written once). The file is
// created on the first use of a core, removed at normal exit.
void configure_stats_page(std::string path, std::string meta_json);
void stats_first_use(c10::DeviceIndex device);  // creates the page if needed
inline std::atomic<int64_t*> g_stats_fields{nullptr};  // mapped page, device area
inline int64_t* stats_field(c10::DeviceIndex device, StatsField field) {
  int64_t* base = g_stats_fields.load(std::memory_order_relaxed);
  if (base == nullptr || device < 0) return nullptr;
  return base + device * (kStatsDeviceStride / 8) + field;
}
inline void stats_store(c10::DeviceIndex device, StatsField field, int64_t value) {
  if (int64_t* p = stats_field(device, field)) __atomic_store_n(p, value, __ATOMIC_RELAXED);
}
inline void stats_add(c10::DeviceIndex device, StatsField field, int64_t value) {
  if (int64_t* p = stats_field(device, field)) __atomic_fetch_add(p, value, __ATOMIC_RELAXED);
}
std::string stats_page_path();  // "" until created

// ---- memory snapshots (allocator.cpp) -------------------------------------
struct SnapshotBlock {
  uint64_t address;
  size_t size;
  size_t requested;
  bool allocated;
  std::shared_ptr<c10::GatheredContext> context;
};
struct SnapshotSegment {
  int device;
  uint64_t address;
  size_t total_size;
  bool small_pool;
  bool host_kernel;  // adopted from a host kernel outside the device allocator
  std::vector<SnapshotBlock> blocks;
  std::shared_ptr<c10::GatheredContext> context;
};
struct SnapshotTrace {
  const char* action;  // "alloc", "free_requested", "free_completed", "segment_alloc", ...
  uint64_t address;
  size_t size;
  int64_t time_us;
  std::shared_ptr<c10::GatheredContext> context;
};
struct AllocatorSnapshot {
  std::vector<SnapshotSegment> segments;
  std::vector<std::vector<SnapshotTrace>> traces;  // per device
  bool recording;
};
using ContextFn = std::shared_ptr<c10::GatheredContext> (*)();
// record: keep trace entries (up to max_entries per device); context_fn: stack
// capture for blocks and entries (nullptr: none).
void record_memory_history(bool enabled, bool record_trace, size_t max_entries, ContextFn context_fn);
AllocatorSnapshot allocator_snapshot();
void set_allocator_cache_limit(int64_t bytes);  // cached free bytes kept per process
int64_t allocator_cache_limit();
// No caching: every allocation its own exact segment, returned when freed, and host-kernel
// outputs adopted from the CPU allocator (the allocator before caching; baseline, debugging).
void set_allocator_no_caching(bool on);
int64_t allocator_cached_bytes();  // free bytes in segments, all devices
// Dry run: segments are phantom (reserve no host memory); latched at the first segment.
bool allocator_phantom();

}  // namespace torch_neuronx
