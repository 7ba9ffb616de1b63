// Op tracking: how many times each ATen op ran on the virtual NeuronCore, and
// how long each core was busy. torch_neuronx.get_executed_ops() reads it.
//
// The table is a fixed open-addressing hash keyed by the operator's schema
// address (stable for the life of the registration): a lookup is a hash and a
// few relaxed loads, a count is one relaxed atomic add. An op is inserted once,
// with a compare-and-swap; nothing on this path takes a lock.
//
// Busy time is read from the CPU's time-stamp counter where the kernel itself
// keeps time with it (clocksource "tsc": invariant across cores), converted to
// ns with a rate calibrated against the steady clock: two counter reads cost
// ~25 ns where two steady-clock reads cost ~65 ns (a VM's vDSO), which was
// most of the per-op publishing cost. Elsewhere the steady clock is used.
#include "tools_core.h"

#include <time.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

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

// One thread-local record, so that a scope resolves thread-local storage once.
struct ThreadOps {
  int depth = 0;
  c10::DeviceIndex host_device = -1;
};
thread_local ThreadOps t_ops;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool kernel_uses_tsc() {
#if defined(__x86_64__)
  FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (f == nullptr) return false;
  char name[32] = {0};
  const bool ok = std::fgets(name, sizeof(name), f) != nullptr && std::strncmp(name, "tsc", 3) == 0;
  std::fclose(f);
  return ok;
#else
  return false;
#endif
}

// Ticks of the busy-time clock and their length in ns.
struct BusyClock {
  bool tsc = kernel_uses_tsc();
  uint64_t tick0 = read();
  int64_t ns0 = now_ns();
  std::atomic<double> ns_per_tick{tsc ? 0.0 : 1.0};  // 0: not calibrated yet

  uint64_t read() const {
#if defined(__x86_64__)
    if (tsc) return __rdtsc();
#endif
    return static_cast<uint64_t>(now_ns());
  }
  double rate() {
    const double r = ns_per_tick.load(std::memory_order_relaxed);
    return r > 0 ? r : calibrate();
  }
  // The rate over the time since the library was loaded; fixed once that
  // interval is 20 ms long (the two reads' error is then under 1e-5).
  double calibrate() {
    const int64_t dns = now_ns() - ns0;
    const uint64_t dticks = read() - tick0;
    if (dns <= 0 || dticks == 0) return 0.0;
    const double r = static_cast<double>(dns) / static_cast<double>(dticks);
    if (dns >= 20000000) ns_per_tick.store(r, std::memory_order_relaxed);
    return r;
  }
};
BusyClock g_clock;

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

OpScope::OpScope(OpSlot* slot, c10::DeviceIndex device) : slot_(slot), device_(device), start_ticks_(0) {
  ThreadOps& t = t_ops;
  previous_host_device_ = t.host_device;
  outermost_ = t.depth++ == 0;
  t.host_device = device;
  // Busy time is only published into a mapped page: no page, no clock read.
  if (outermost_ && g_stats_fields.load(std::memory_order_relaxed) != nullptr) start_ticks_ = g_clock.read();
}

OpScope::~OpScope() {
  ThreadOps& t = t_ops;
  --t.depth;
  t.host_device = previous_host_device_;
  if (slot_ != nullptr) slot_->count.fetch_add(1, std::memory_order_relaxed);
  if (int64_t* ops = stats_field(device_, kOps)) {
    __atomic_fetch_add(ops, 1, __ATOMIC_RELAXED);
    if (start_ticks_ != 0) {
      const double ns = static_cast<double>(g_clock.read() - start_ticks_) * g_clock.rate();
      __atomic_fetch_add(ops + (kBusyNs - kOps), static_cast<int64_t>(std::llround(ns)), __ATOMIC_RELAXED);
    }
  }
}

c10::DeviceIndex host_kernel_device() { return t_ops.host_device; }

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
// Returns (wall ns, thread CPU ns) per scope: on a loaded host the wall figure
// includes time other processes ran, the thread's CPU time does not.
std::pair<double, double> measure_op_scope_ns(int64_t iterations) {
  static OpSlot* slot = named_op_slot("torch_neuronx::op_scope_benchmark");
  constexpr c10::DeviceIndex kUnshown = kStatsMaxDevices - 1;
  auto cpu_ns = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  };
  auto wall_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  const int64_t wall0 = wall_ns(), cpu0 = cpu_ns();
  for (int64_t i = 0; i < iterations; ++i) {
    OpScope scope(slot, kUnshown);
  }
  const int64_t cpu1 = cpu_ns(), wall1 = wall_ns();
  slot->count.store(0);
  const double n = static_cast<double>(std::max<int64_t>(iterations, 1));
  return {static_cast<double>(wall1 - wall0) / n, static_cast<double>(cpu1 - cpu0) / n};
}

}  // namespace torch_neuronx
