// The per-process stats page: a small file in the per-user runtime folder,
// mapped shared, that the core updates in place (relaxed stores and adds) and
// neuron-ls / neuron-top / neuron-monitor read. Created on the first use of a
// core, so processes that only import torch do not appear; removed at normal
// exit. A crashed process leaves its file behind: readers check that the pid
// is alive and started when the page says (torch_neuronx/tools/api/registry.py).
#include "tools_core.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace torch_neuronx {
namespace {

std::mutex g_mutex;
std::string g_path;          // configured
std::string g_meta;
std::string g_created_path;  // created by this pid
pid_t g_creator = 0;

void remove_page_at_exit() {
  // A child forked after the page was made must not remove its parent's page.
  if (g_creator == getpid() && !g_created_path.empty()) ::unlink(g_created_path.c_str());
}

void create_locked() {
  if (g_path.empty() || g_stats_fields.load() != nullptr) return;
  const std::string tmp = g_path + ".tmp";
  int fd = ::open(tmp.c_str(), O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;  // the tools are an observer: no page, no error
  if (::ftruncate(fd, kStatsPageBytes) != 0) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return;
  }
  void* base = ::mmap(nullptr, kStatsPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) {
    ::unlink(tmp.c_str());
    return;
  }
  auto* bytes = static_cast<unsigned char*>(base);
  const uint64_t magic = kStatsMagic;
  const uint32_t version = kStatsVersion;
  const int64_t pid = getpid();
  const uint32_t devices = kStatsMaxDevices;
  std::memcpy(bytes + 8, &version, 4);
  std::memcpy(bytes + 12, &devices, 4);
  std::memcpy(bytes + 16, &pid, 8);
  const size_t n = std::min(g_meta.size(), kStatsMetaSize - 1);
  std::memcpy(bytes + kStatsMetaOffset, g_meta.data(), n);
  __atomic_store_n(reinterpret_cast<uint64_t*>(bytes), magic, __ATOMIC_RELEASE);  // complete
  // Rename last: readers never see a half-written header.
  if (::rename(tmp.c_str(), g_path.c_str()) != 0) {
    ::munmap(base, kStatsPageBytes);
    ::unlink(tmp.c_str());
    return;
  }
  g_created_path = g_path;
  if (g_creator == 0) std::atexit(remove_page_at_exit);
  g_creator = getpid();
  g_stats_fields.store(reinterpret_cast<int64_t*>(bytes + kStatsDeviceOffset));
}

}  // namespace

void configure_stats_page(std::string path, std::string meta_json) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_path = std::move(path);
  g_meta = std::move(meta_json);
}

void stats_first_use(c10::DeviceIndex device) {
  if (g_stats_fields.load(std::memory_order_relaxed) == nullptr) {
    std::lock_guard<std::mutex> lock(g_mutex);
    create_locked();
  }
  stats_store(device, kUsed, 1);
}

std::string stats_page_path() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_stats_fields.load() != nullptr ? g_created_path : std::string();
}

}  // namespace torch_neuronx
