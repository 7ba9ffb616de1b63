// PrivateUse1HooksInterface: what ATen asks of the neuron device by name.
#include "neuron_core.h"
#include "pinned_host.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

namespace torch_neuronx {
namespace {

struct NeuronHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    return is_used(device_index);
  }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_current_device(device); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const c10::DeviceIndex previous = current_device();
    if (device != previous) set_current_device(device);
    return previous;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return new_generator(device_index);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    const c10::DeviceIndex index = device_of_ptr(data);
    TORCH_CHECK(index >= 0, "the pointer ", data,
                " was not allocated by the neuron allocator (pass the start of a neuron "
                "allocation, or give the device explicitly).");
    return c10::Device(kNeuron, index);
  }

  // Any address inside a pinned block counts (interior views), as on CUDA.
  bool isPinnedPtr(const void* data) const override { return is_in_pinned_block(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_block_allocator(); }

  // untyped_storage().resize_(n): FSDP2 frees and re-grows parameter storage.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
    c10::DeviceGuard guard(storage.device());
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    if (newsize == 0) {
      impl->set_data_ptr_noswap(c10::DataPtr(nullptr, storage.device()));
      impl->set_nbytes(0);
      return;
    }
    c10::DataPtr fresh = impl->allocator()->allocate(newsize);
    const size_t keep = std::min(newsize, impl->nbytes());
    if (keep > 0 && impl->data_ptr().get() != nullptr) {
      std::memcpy(fresh.get(), impl->data_ptr().get(), keep);
    }
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }
};

struct HooksRegistration {
  HooksRegistration() { at::RegisterPrivateUse1HooksInterface(new NeuronHooks()); }
} g_hooks_registration;

}  // namespace
}  // namespace torch_neuronx
