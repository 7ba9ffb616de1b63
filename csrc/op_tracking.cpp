// Op tracking: how many times each ATen op ran on the virtual NeuronCore, and
// how long each core was busy. torch_neuronx.get_executed_ops() reads it.
//
// The table is a fixed open-addressing hash keyed by the operator's schema
// address (stable for the life of the registration): a lookup is a hash and a
// few relaxed loads, a count is one relaxed atomic add. An op is inserted once,
// with a compare-and-swap; nothing on this path takes a lock.
#include "tools_core.h"

#include <array>
#include <chrono>
#include <mutex>

namespace torch_neuronx {

struct OpSlot {
  std::atomic<const void*> key{nullptr};
  std::atomic<bool> ready{false};  // name written
  std::atomic<int64_t> count{0};
  std::string name;
};

namespace {

constexpr size_t kSlots = 8192;  // ~2,500 aten overloads exist; the table never fills
std::array<OpSlot, kSlots> g_slots;
std::mutex g_named_mutex;  // explicit kernels' slots: created once each, off the hot path

thread_local c10::DeviceIndex t_host_device = -1;
thread_local int t_depth = 0;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

size_t hash_ptr(const void* p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  v ^= v >> 17;
  v *= 0xed5ad4bbU;
  v ^= v >> 11;
  return v & (kSlots - 1);
}

// `name` builds the op's name; called only when the op is inserted.
template <typename NameFn>
OpSlot* find_or_insert(const void* key, NameFn name) {
  for (size_t i = hash_ptr(key), n = 0; n < kSlots; ++n, i = (i + 1) & (kSlots - 1)) {
    OpSlot& slot = g_slots[i];
    const void* current = slot.key.load(std::memory_order_acquire);
    if (current == key) return &slot;
    if (current == nullptr) {
      const void* expected = nullptr;
      if (slot.key.compare_exchange_strong(expected, key, std::memory_order_acq_rel)) {
        slot.name = name();
        slot.ready.store(true, std::memory_order_release);
        return &slot;
      }
      if (expected == key) return &slot;
    }
  }
  return nullptr;  // full: the op is not counted (cannot happen with kSlots > #ops)
}

}  // namespace

OpSlot* op_slot(const c10::OperatorHandle& op) {
  return find_or_insert(&op.schema(), [&op] {
    const auto& name = op.schema().operator_name();
    return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
  });
}

OpSlot* named_op_slot(const char* name) {
  std::lock_guard<std::mutex> lock(g_named_mutex);
  return find_or_insert(name, [name] { return std::string(name); });  // the literal's address is the key
}

OpScope::OpScope(OpSlot* slot, c10::DeviceIndex device)
    : slot_(slot), device_(device), previous_host_device_(t_host_device), start_ns_(0),
      outermost_(t_depth == 0) {
  ++t_depth;
  t_host_device = device;
  if (outermost_) start_ns_ = now_ns();
}

OpScope::~OpScope() {
  --t_depth;
  t_host_device = previous_host_device_;
  if (slot_ != nullptr) slot_->count.fetch_add(1, std::memory_order_relaxed);
  stats_add(device_, kOps, 1);
  if (outermost_) stats_add(device_, kBusyNs, now_ns() - start_ns_);
}

c10::DeviceIndex host_kernel_device() { return t_host_device; }

std::vector<OpCount> op_counts() {
  std::vector<OpCount> out;
  for (const OpSlot& slot : g_slots) {
    if (!slot.ready.load(std::memory_order_acquire)) continue;
    const int64_t count = slot.count.load(std::memory_order_relaxed);
    if (count > 0) out.push_back({slot.name, count});
  }
  return out;
}

void clear_op_tracking() {
  for (OpSlot& slot : g_slots) slot.count.store(0, std::memory_order_relaxed);
}

}  // namespace torch_neuronx

namespace torch_neuronx {

// Cost of one OpScope (lookup excluded: the slot is resolved once, as in the
// explicit kernels), for benchmarks/op_tracking_cost.py. Published into the
// last device slot, which no process shows, and its count is reset after.
double measure_op_scope_ns(int64_t iterations) {
  static OpSlot* slot = named_op_slot("torch_neuronx::op_scope_benchmark");
  constexpr c10::DeviceIndex kUnshown = kStatsMaxDevices - 1;
  const int64_t start = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch()).count();
  for (int64_t i = 0; i < iterations; ++i) {
    OpScope scope(slot, kUnshown);
  }
  const int64_t end = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch()).count();
  slot->count.store(0);
  return static_cast<double>(end - start) / static_cast<double>(std::max<int64_t>(iterations, 1));
}

}  // namespace torch_neuronx
