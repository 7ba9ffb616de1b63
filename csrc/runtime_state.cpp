// Process-wide state of the virtual NeuronCore runtime as the C++ core sees
// it: how many logical cores are visible, their HBM capacity, the current
// device per thread, and whether this process is a child forked after use.
#include "neuron_core.h"

#include <pthread.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <vector>

namespace torch_neuronx {
namespace {

std::mutex g_config_mutex;
RuntimeConfig g_config;
std::atomic<bool> g_initialized{false};
std::atomic<bool> g_bad_fork{false};
constexpr int kMaxDevices = 128;
std::atomic<bool> g_used[kMaxDevices];

// Native ids of the threads that ran neuron work, so that interpreter exit can
// stop the daemon ones among them while Python is still alive (see
// torch_neuronx/runtime/_exit_guard.py).
std::mutex g_threads_mutex;
std::vector<int64_t> g_neuron_threads;

void on_fork_child() {
  // Memory and runtime state of the parent are not usable in the child.
  if (g_initialized.load()) {
    g_bad_fork.store(true);
  }
}

struct ForkHandlerRegistration {
  ForkHandlerRegistration() { pthread_atfork(nullptr, nullptr, on_fork_child); }
} g_fork_handler;

}  // namespace

namespace runtime_detail {
std::atomic<int> g_device_count{0};
std::atomic<bool> g_has_error{false};
__thread bool t_noted = false;
std::atomic<int> g_default_device{0};
__thread int t_current_device = -1;

void note_neuron_thread_slow() {
  t_noted = true;
  const int64_t tid = static_cast<int64_t>(syscall(SYS_gettid));
  std::lock_guard<std::mutex> lock(g_threads_mutex);
  g_neuron_threads.push_back(tid);
}
}  // namespace runtime_detail

using runtime_detail::g_device_count;
using runtime_detail::g_has_error;
using runtime_detail::g_default_device;
using runtime_detail::t_current_device;

void configure_runtime(RuntimeConfig config) {
  std::lock_guard<std::mutex> lock(g_config_mutex);
  TORCH_CHECK(config.hbm_capacity_bytes.size() < kMaxDevices,
              "torch-neuronx supports at most ", kMaxDevices - 1,
              " visible NeuronCores per process (c10::DeviceIndex is 8-bit); "
              "restrict them with NEURON_RT_VISIBLE_CORES.");
  g_config = std::move(config);
  g_has_error.store(!g_config.error.empty());
  g_default_device.store(g_config.default_device);
  g_device_count.store(static_cast<int>(g_config.hbm_capacity_bytes.size()));
}

c10::DeviceIndex device_count() {
  return static_cast<c10::DeviceIndex>(g_device_count.load());
}

static void raise_config_error() {
  std::string message;
  {
    std::lock_guard<std::mutex> lock(g_config_mutex);
    message = g_config.error;
  }
  TORCH_CHECK(false, message);
}

namespace runtime_detail {
void raise_device_error(c10::DeviceIndex index) {
  if (g_has_error.load()) raise_config_error();
  const int count = g_device_count.load();
  TORCH_CHECK(index >= 0 && index < count,
              "neuron error: invalid device ordinal: neuron:", int(index),
              " does not exist; this process sees ", count,
              " NeuronCore(s) (torch.neuron.device_count()). Use an index below ",
              count, ", or change NEURON_RT_VISIBLE_CORES / NEURON_LOGICAL_NC_CONFIG.");
}
}  // namespace runtime_detail

int64_t hbm_capacity(c10::DeviceIndex index) {
  check_device(index);
  std::lock_guard<std::mutex> lock(g_config_mutex);
  return g_config.hbm_capacity_bytes[index];
}

void set_current_device(c10::DeviceIndex index) {
  check_device_ordinal(index);
  t_current_device = index;
}

void mark_used(c10::DeviceIndex index) {
  g_initialized.store(true, std::memory_order_relaxed);
  g_used[index].store(true, std::memory_order_relaxed);
}

bool is_used(c10::DeviceIndex index) {
  return index >= 0 && index < kMaxDevices && g_used[index].load();
}

std::vector<int64_t> neuron_thread_ids() {
  std::lock_guard<std::mutex> lock(g_threads_mutex);
  return g_neuron_threads;
}

bool is_initialized() { return g_initialized.load(); }
void mark_initialized() { g_initialized.store(true); }
bool in_bad_fork() { return g_bad_fork.load(); }

void check_not_in_bad_fork() {
  TORCH_CHECK(!g_bad_fork.load(),
              "Cannot re-initialize Neuron runtime in forked subprocess. To use "
              "Neuron with multiprocessing, you must use the 'spawn' start method "
              "(torch.multiprocessing.set_start_method('spawn')).");
}

}  // namespace torch_neuronx
