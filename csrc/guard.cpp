// DeviceGuardImpl of the neuron device: current device, streams and events.
//
// The virtual NeuronCore executes every op synchronously on the host, in the
// order it is issued, so all streams are complete at all times: queries return
// true, synchronize and wait are ordering no-ops, and events record the host
// time at which they were reached (elapsed_time measures real work).
#include "neuron_core.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <array>
#include <atomic>
#include <chrono>

namespace torch_neuronx {
namespace {

constexpr c10::StreamId kDefaultStream = 0;
constexpr int kPoolSize = 32;  // ids 1..32 form the shared pool, as CUDA's

std::atomic<c10::StreamId> g_next_stream_id{kPoolSize + 1};
std::atomic<uint32_t> g_pool_cursor{0};
thread_local std::array<c10::StreamId, 128> t_current_stream{};  // all default

struct NeuronEvent {
  c10::DeviceIndex device = -1;
  bool recorded = false;
  int64_t host_time_ns = 0;
};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct NeuronGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNeuron; }

  c10::Device exchangeDevice(c10::Device device) const override {
    const c10::Device previous = getDevice();
    if (device.index() != previous.index()) setDevice(device);
    return previous;
  }
  c10::Device getDevice() const override { return c10::Device(kNeuron, current_device()); }
  void setDevice(c10::Device device) const override {
    TORCH_CHECK(device.type() == kNeuron, "expected a neuron device, got ", device);
    set_current_device(device.index());
  }
  void uncheckedSetDevice(c10::Device device) const noexcept override {
    try {
      set_current_device(device.index());
    } catch (...) {
    }
  }

  // A stream always names its core: `torch.Stream(device="neuron")` (no
  // index) and the pool resolve to the current device, as CUDA's do, so
  // events recorded on them report `neuron:N` and `with stream:` can select
  // it. A core that does not exist raises "invalid device ordinal".
  c10::Stream getStream(c10::Device device) const override {
    const c10::Device dev = resolved(device);
    return c10::Stream(c10::Stream::UNSAFE, dev, t_current_stream[dev.index()]);
  }
  c10::Stream getDefaultStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::UNSAFE, resolved(device), kDefaultStream);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool /*high_priority*/) const override {
    const c10::Device dev = resolved(device);
    const c10::StreamId id = 1 + static_cast<c10::StreamId>(g_pool_cursor++ % kPoolSize);
    return c10::Stream(c10::Stream::UNSAFE, dev, id);
  }
  c10::Stream getNewStream(c10::Device device, int /*priority*/) const override {
    return c10::Stream(c10::Stream::UNSAFE, resolved(device), g_next_stream_id++);
  }
  c10::Stream exchangeStream(c10::Stream stream) const override {
    const c10::Device dev = resolved(stream.device());
    const c10::Stream previous(c10::Stream::UNSAFE, dev, t_current_stream[dev.index()]);
    t_current_stream[dev.index()] = stream.id();
    return previous;
  }

  // The virtual core runs every dtype the host kernels do. Quantized dtypes
  // have no neuron kernels (not even `empty`), and the 1-7 bit integer
  // placeholders have no kernels on any device, so they are reported absent.
  c10::DeviceCapability getDeviceCapability(c10::Device device) const override {
    resolved(device);
    c10::DeviceCapability cap;
    auto& types = cap.capability_data.supported_scalar_types;
    types.has_QInt8 = types.has_QUInt8 = types.has_QInt32 = 0;
    types.has_QUInt4x2 = types.has_QUInt2x4 = 0;
    types.has_UInt1 = types.has_UInt2 = types.has_UInt3 = types.has_UInt4 = 0;
    types.has_UInt5 = types.has_UInt6 = types.has_UInt7 = 0;
    types.has_Int1 = types.has_Int2 = types.has_Int3 = types.has_Int4 = 0;
    types.has_Int5 = types.has_Int6 = types.has_Int7 = 0;
    return cap;
  }

  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "Event device index ", int(device_index),
                " does not match recording stream's device index ",
                int(stream.device_index()), ".");
    auto* e = static_cast<NeuronEvent*>(*event);
    if (e == nullptr) {
      e = new NeuronEvent();
      *event = e;
    }
    e->device = stream.device_index();
    e->recorded = true;
    e->host_time_ns = now_ns();
  }
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<NeuronEvent*>(event);
  }
  void synchronizeEvent(void*) const override {}
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    auto* a = static_cast<NeuronEvent*>(start);
    auto* b = static_cast<NeuronEvent*>(end);
    TORCH_CHECK(a && b && a->recorded && b->recorded,
                "Both events must be recorded before calculating elapsed time: call "
                "event.record() on each (torch.neuron.Event(enable_timing=True)).");
    return static_cast<double>(b->host_time_ns - a->host_time_ns) / 1.0e6;
  }

  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    if (device_index >= 0) check_device(device_index);
  }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}

 private:
  static c10::Device resolved(c10::Device device) {
    const c10::DeviceIndex idx = device.has_index() ? device.index() : current_device();
    check_device_ordinal(idx);
    return c10::Device(kNeuron, idx);
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

void synchronize_device(c10::DeviceIndex index) { check_device(index); }

}  // namespace torch_neuronx
