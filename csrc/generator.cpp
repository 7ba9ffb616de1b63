// Random number generators of the neuron device.
//
// The public state is Philox-style: (seed, offset), 16 bytes, which is what
// DTensor's RNG tracker reads and writes. Numbers are drawn by the CPU kernels
// (the host executes every op), so each generator owns a CPU engine that is
// re-seeded from (seed, offset) before a random op and the offset advances by
// the numbers drawn. With offset 0 the engine seed equals the user seed, so the
// first random op after torch.manual_seed(s) draws what the CPU would draw.
#include "neuron_core.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/ops/empty.h>
#include <c10/core/GeneratorImpl.h>

#include <array>
#include <cstring>
#include <memory>
#include <mutex>

namespace torch_neuronx {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

class NeuronGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit NeuronGeneratorImpl(c10::DeviceIndex index)
      : c10::GeneratorImpl(c10::Device(kNeuron, index),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        engine_(at::make_generator<at::CPUGeneratorImpl>(seed_)) {}

  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    offset_ = 0;
  }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    const uint64_t s = c10::detail::getNonDeterministicRandom(false);
    set_current_seed(s);
    return s;
  }

  void set_state(const c10::TensorImpl& state) override {
    TORCH_CHECK(state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && state.numel() == 16,
                "neuron RNG state must be a uint8 tensor of 16 bytes (seed, offset), got ",
                state.numel(), " elements of ", state.dtype().name(),
                ". Pass a state returned by torch.neuron.get_rng_state().");
    std::array<uint64_t, 2> values{};
    std::memcpy(values.data(), state.data(), 16);
    seed_ = values[0];
    offset_ = values[1];
  }

  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    auto state = at::empty({16}, at::TensorOptions().dtype(at::kByte));
    const std::array<uint64_t, 2> values{seed_, offset_};
    std::memcpy(state.data_ptr(), values.data(), 16);
    return state.getIntrusivePtr();
  }

  at::Generator prepare() {
    const uint64_t engine_seed = offset_ == 0 ? seed_ : splitmix64(seed_ ^ splitmix64(offset_));
    engine_.set_current_seed(engine_seed);
    return engine_;
  }

  void advance(uint64_t numel) { offset_ += ((numel + 3) / 4) * 4; }

  static c10::DeviceType device_type() { return kNeuron; }

 private:
  NeuronGeneratorImpl* clone_impl() const override {
    auto* gen = new NeuronGeneratorImpl(device().index());
    gen->seed_ = seed_;
    gen->offset_ = offset_;
    return gen;
  }

  uint64_t seed_ = c10::default_rng_seed_val;
  uint64_t offset_ = 0;
  at::Generator engine_;
};

NeuronGeneratorImpl* impl_of(const at::Generator& gen) {
  return static_cast<NeuronGeneratorImpl*>(gen.unsafeGetGeneratorImpl());
}

std::once_flag g_default_once[128];
at::Generator g_default_generators[128];

}  // namespace

const at::Generator& default_generator(c10::DeviceIndex index) {
  if (index == -1) index = current_device();
  check_device(index);
  std::call_once(g_default_once[index], [index] {
    g_default_generators[index] = at::make_generator<NeuronGeneratorImpl>(index);
  });
  return g_default_generators[index];
}

at::Generator new_generator(c10::DeviceIndex index) {
  if (index == -1) index = current_device();
  check_device(index);
  return at::make_generator<NeuronGeneratorImpl>(index);
}

bool is_neuron_generator(const at::Generator& gen) {
  return gen.defined() && gen.device().type() == kNeuron;
}

at::Generator prepare_engine(const at::Generator& gen) { return impl_of(gen)->prepare(); }

void advance_offset(const at::Generator& gen, uint64_t numel) { impl_of(gen)->advance(numel); }

}  // namespace torch_neuronx
