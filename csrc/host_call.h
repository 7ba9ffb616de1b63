// The conversions of one host-kernel call on the virtual NeuronCore: neuron
// arguments -> CPU aliases of the same bytes, and CPU results -> neuron tensors
// (the caller's tensor for in-place/out=, a view of an input's neuron storage,
// or a fresh result adopted without a copy). The boxed fallback (fallback.cpp)
// runs every op through it; the unboxed kernels of the hottest ops
// (direct_kernels.cpp) use the same conversions without the boxing.
#pragma once

#include "host_aliases.h"
#include "neuron_core.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/SmallVector.h>

#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

namespace torch_neuronx {
namespace host_call {

// Ops that take CPU index tensors alongside device tensors on CUDA as well.
inline bool accepts_cpu_tensors(const c10::OperatorName& name) {
  static const std::unordered_set<std::string> ops = {
      "aten::index", "aten::index_put_", "aten::index_put", "aten::_index_put_impl_",
      "aten::_unsafe_index", "aten::_unsafe_index_put"};
  return ops.count(name.name) > 0;
}

inline bool is_optional_generator(const c10::Argument& arg) {
  const auto& type = arg.type();
  if (type->kind() != c10::TypeKind::OptionalType) return false;
  return type->castRaw<c10::OptionalType>()->getElementType()->kind() ==
         c10::TypeKind::GeneratorType;
}

inline std::string device_str(c10::DeviceIndex index) { return "neuron:" + std::to_string(int(index)); }

class HostCall {
 public:
  explicit HostCall(const c10::OperatorHandle& op) : op_(op) {}
  // Cached aliases go back to this thread's cache once nothing of the call
  // (the written-argument records) holds them any more.
  ~HostCall() {
    writes_.clear();
    aliases_.release();
  }
  HostCall(const HostCall&) = delete;
  HostCall& operator=(const HostCall&) = delete;

  // Argument pass: neuron tensors -> host aliases, neuron devices -> cpu.
  void convert_arguments(torch::jit::Stack* stack) {
    const auto& args = op_.schema().arguments();
    const size_t n = args.size();
    const size_t base = stack->size() - n;
    for (size_t i = 0; i < n; ++i) {
      c10::IValue& value = (*stack)[base + i];
      const bool is_write = args[i].alias_info() != nullptr && args[i].alias_info()->isWrite();
      if (value.isTensor()) {
        value = to_host(value.toTensor(), is_write);
      } else if (value.isTensorList()) {
        auto list = value.toTensorList();
        c10::List<at::Tensor> host;
        host.reserve(list.size());
        for (const at::Tensor& t : list) host.push_back(to_host(t, is_write));
        value = std::move(host);
      } else if (value.isList()) {
        auto list = value.toList();
        if (!list.empty() && (list.get(0).isTensor() || list.get(0).isNone())) {
          c10::List<std::optional<at::Tensor>> host;
          host.reserve(list.size());
          for (const c10::IValue& item : list) {
            if (item.isTensor()) {
              host.push_back(to_host(item.toTensor(), is_write));
            } else {
              host.push_back(std::nullopt);
            }
          }
          value = std::move(host);
        }
      } else if (value.isDevice()) {
        const c10::Device device = value.toDevice();
        if (device.type() == kNeuron) {
          note_device(device.has_index() ? device.index() : current_device());
          value = c10::Device(c10::DeviceType::CPU);
        }
      } else if (value.isGenerator()) {
        generator_slots_.push_back(base + i);
      } else if (value.isNone() && is_optional_generator(args[i])) {
        generator_slots_.push_back(base + i);
      }
    }
    check_devices();
  }

  // Random ops: substitute the neuron generator's seeded CPU engine.
  void bind_generators(torch::jit::Stack* stack) {
    for (size_t slot : generator_slots_) {
      c10::IValue& value = (*stack)[slot];
      at::Generator gen;
      if (value.isNone()) {
        gen = default_generator(*device_);
      } else {
        gen = value.toGenerator();
        TORCH_CHECK(is_neuron_generator(gen), "Expected a 'neuron' device type for generator but ",
                    "found '", gen.device().type(), "' in ", op_.schema().name(),
                    ". Create it with torch.Generator(device='neuron').");
      }
      generators_.push_back(gen);
      value = prepare_engine(gen);
    }
  }

  void advance_generators(torch::jit::Stack* stack, size_t num_returns) {
    if (generators_.empty()) return;
    uint64_t drawn = 0;
    for (size_t i = stack->size() - num_returns; i < stack->size(); ++i) {
      const c10::IValue& v = (*stack)[i];
      if (v.isTensor() && v.toTensor().defined()) drawn += v.toTensor().numel();
    }
    for (const auto& w : writes_) drawn = std::max<uint64_t>(drawn, neuron(w.neuron).numel());
    for (const at::Generator& gen : generators_) advance_offset(gen, std::max<uint64_t>(drawn, 1));
  }

  std::vector<std::unique_lock<std::mutex>> lock_generators() {
    std::vector<std::unique_lock<std::mutex>> locks;
    for (at::Generator& gen : generators_) locks.emplace_back(gen.mutex());
    return locks;
  }

  // Mutated arguments whose host alias was resized or re-pointed by the kernel
  // (out= with a wrong size): move the new bytes and geometry into the neuron
  // tensor, as the CPU kernel did for its own output.
  void sync_written_arguments() {
    for (const auto& w : writes_) {
      sync_written_output(neuron(w.neuron), w.host, w.alias_storage, *device_);
    }
  }

  void convert_returns(torch::jit::Stack* stack, size_t num_returns) {
    for (size_t i = stack->size() - num_returns; i < stack->size(); ++i) {
      c10::IValue& value = (*stack)[i];
      if (value.isTensor()) {
        value = from_host(value.toTensor());
      } else if (value.isTensorList()) {
        auto list = value.toTensorList();
        c10::List<at::Tensor> out;
        out.reserve(list.size());
        for (const at::Tensor& t : list) out.push_back(from_host(t));
        value = std::move(out);
      }
    }
  }

  void validate_devices() { check_devices(); }
  bool has_device() const { return device_.has_value(); }
  c10::DeviceIndex device() const { return *device_; }

  // Unboxed kernels (direct_kernels.cpp): the same conversions, one argument
  // or result at a time, on the caller's own references.
  at::Tensor borrow_to_host(const at::Tensor& t, bool is_write) { return to_host(t, is_write, true); }
  at::Tensor result_from_host(const at::Tensor& r) { return from_host(r); }
  // The caller's tensor that a kernel returned by reference (in-place, out=).
  at::Tensor& written_neuron(const at::Tensor& host_result) {
    for (const auto& w : writes_) {
      if (w.host.unsafeGetTensorImpl() == host_result.unsafeGetTensorImpl()) {
        return const_cast<at::Tensor&>(neuron(w.neuron));  // a mutable argument of the caller
      }
    }
    TORCH_INTERNAL_ASSERT(false, op_.schema().name(), " returned a tensor reference that is not one "
                          "of its mutable arguments");
  }

 private:
  // The caller's neuron tensor: borrowed (unboxed kernels: the caller's
  // reference outlives the call, and taking no reference of our own keeps
  // Python-owned tensors' refcounts off the 1 <-> 2 transitions that take the
  // GIL) or owned (boxed: the stack slot is overwritten with the alias).
  struct NeuronRef {
    const at::Tensor* borrowed;
    int owned;
  };
  const at::Tensor& neuron(const NeuronRef& ref) const {
    return ref.borrowed != nullptr ? *ref.borrowed : owned_[ref.owned];
  }
  struct Input {
    c10::TensorImpl* host;
    NeuronRef neuron;
  };
  struct Write {
    NeuronRef neuron;
    at::Tensor host;
    c10::StorageImpl* alias_storage;
  };
  struct Fresh {
    c10::StorageImpl* host;
    c10::Storage neuron;
  };

  at::Tensor to_host(const at::Tensor& t, bool is_write, bool borrow = false) {
    if (!t.defined()) return t;
    if (t.is_privateuseone()) {
      note_device(t.device().index());
      at::Tensor host = host_alias(t);
      c10::StorageImpl* alias = host.storage().unsafeGetStorageImpl();
      NeuronRef ref{&t, -1};
      if (!borrow) {
        ref = {nullptr, static_cast<int>(owned_.size())};
        owned_.push_back(t);
      }
      inputs_.push_back({host.unsafeGetTensorImpl(), ref});
      if (is_write) writes_.push_back({ref, host, alias});
      return host;
    }
    if (t.is_cpu()) {
      if (t.dim() > 0 && !t.unsafeGetTensorImpl()->is_wrapped_number()) saw_cpu_tensor_ = true;
      return t;
    }
    other_device_ = t.device();
    return t;
  }

  at::Tensor host_alias(const at::Tensor& t) { return aliases_.of(t); }

  at::Tensor from_host(const at::Tensor& r) {
    if (!r.defined() || r.is_privateuseone()) return r;
    TORCH_CHECK(r.layout() == at::kStrided, op_.schema().name(), " returned a ", r.layout(),
                " tensor; the neuron device supports strided (dense) tensors only. Run this op "
                "on CPU tensors.");
    c10::TensorImpl* impl = r.unsafeGetTensorImpl();
    for (const auto& in : inputs_) {
      if (in.host == impl) return neuron(in.neuron);  // in-place / out=: the caller's tensor
    }
    c10::StorageImpl* storage = r.storage().unsafeGetStorageImpl();
    if (c10::StorageImpl* input = aliases_.neuron_storage_of(storage)) {
      return neuron_view(c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(input)),
                         r);  // a view of an input
    }
    for (const auto& entry : fresh_) {
      if (entry.host == storage) return neuron_view(entry.neuron, r);
    }
    at::Tensor adopted = adopt_host_result(r, *device_);
    fresh_.push_back({storage, adopted.storage()});
    return adopted;
  }

  void note_device(c10::DeviceIndex index) {
    if (!device_.has_value()) {
      device_ = index;
    } else if (*device_ != index && !mismatch_.has_value()) {
      mismatch_ = index;
    }
  }

  void check_devices() {
    const auto& name = op_.schema().operator_name();
    if (mismatch_.has_value()) {
      TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two ",
                  "devices, ", device_str(*device_), " and ", device_str(*mismatch_),
                  "! (when checking arguments for ", name, "). Move them with .to(device).");
    }
    if (other_device_.has_value()) {
      TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two ",
                  "devices, ", device_.has_value() ? device_str(*device_) : "neuron", " and ",
                  *other_device_, "! (when checking arguments for ", name, ").");
    }
    if (saw_cpu_tensor_ && device_.has_value() && !accepts_cpu_tensors(name)) {
      TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two ",
                  "devices, ", device_str(*device_), " and cpu! (when checking arguments for ",
                  name, "). Move the CPU tensor with .to('neuron') (0-dim CPU scalars are allowed).");
    }
    if (!device_.has_value()) {
      TORCH_CHECK(false, "Expected a 'cpu' device type for generator but found 'neuron' in ", name,
                  ": this call has no neuron tensor or device argument. Pass device='neuron', or "
                  "use a CPU generator for CPU tensors.");
    }
    check_device(*device_);
  }

  const c10::OperatorHandle& op_;
  std::optional<c10::DeviceIndex> device_;
  std::optional<c10::DeviceIndex> mismatch_;
  std::optional<c10::Device> other_device_;
  bool saw_cpu_tensor_ = false;
  c10::SmallVector<at::Tensor, 4> owned_;  // boxed calls' neuron tensors (see NeuronRef)
  c10::SmallVector<Input, 4> inputs_;
  c10::SmallVector<Write, 2> writes_;
  c10::SmallVector<Fresh, 2> fresh_;
  c10::SmallVector<size_t, 1> generator_slots_;
  c10::SmallVector<at::Generator, 1> generators_;
  HostAliases aliases_;  // declared last: released first (see ~HostCall)
};

}  // namespace host_call

// Counted for torch_neuronx.get_host_kernel_calls(): ops run by the generic
// host path, boxed or unboxed (fallback.cpp).
void count_host_kernel_call();
// The ops with an unboxed kernel of their own (direct_kernels.cpp); they are
// routed to their CPU kernel like the fallback's routed ops.
std::vector<std::string> direct_op_names();

}  // namespace torch_neuronx
