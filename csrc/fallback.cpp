// The zero-copy host fallback: how the virtual NeuronCore executes an ATen op.
//
// Each neuron tensor argument is replaced by a CPU tensor aliasing the same
// bytes (no copy), the op is redispatched to its CPU kernel, and the results
// are mapped back: in-place and out= results become the original neuron
// tensors, views of an input stay views of its neuron storage, and fresh
// results are adopted into neuron memory without a copy. Random ops draw from
// the neuron generator's CPU engine (generator.cpp).
#include "neuron_core.h"
#include "tools_core.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <atomic>
#include <mutex>
#include <sstream>
#include <unordered_set>

namespace torch_neuronx {
namespace {

std::atomic<int64_t> g_host_kernel_calls{0};

// Ops that take CPU index tensors alongside device tensors on CUDA as well.
bool accepts_cpu_tensors(const c10::OperatorName& name) {
  static const std::unordered_set<std::string> ops = {
      "aten::index", "aten::index_put_", "aten::index_put", "aten::_index_put_impl_",
      "aten::_unsafe_index", "aten::_unsafe_index_put"};
  return ops.count(name.name) > 0;
}

bool is_optional_generator(const c10::Argument& arg) {
  const auto& type = arg.type();
  if (type->kind() != c10::TypeKind::OptionalType) return false;
  return type->castRaw<c10::OptionalType>()->getElementType()->kind() ==
         c10::TypeKind::GeneratorType;
}

std::string device_str(c10::DeviceIndex index) { return "neuron:" + std::to_string(int(index)); }

class HostCall {
 public:
  explicit HostCall(const c10::OperatorHandle& op) : op_(op) {}

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
    for (const auto& w : writes_) drawn = std::max<uint64_t>(drawn, w.neuron.numel());
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
    for (const auto& w : writes_) sync_written_output(w.neuron, w.host, w.alias_storage, *device_);
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

  bool has_device() const { return device_.has_value(); }
  c10::DeviceIndex device() const { return *device_; }

 private:
  struct Input {
    c10::TensorImpl* host;
    at::Tensor neuron;
  };
  struct StorageAlias {
    c10::StorageImpl* neuron;
    c10::Storage host;
  };
  struct Write {
    at::Tensor neuron;
    at::Tensor host;
    c10::StorageImpl* alias_storage;
  };
  struct Fresh {
    c10::StorageImpl* host;
    c10::Storage neuron;
  };

  at::Tensor to_host(const at::Tensor& t, bool is_write) {
    if (!t.defined()) return t;
    if (t.is_privateuseone()) {
      note_device(t.device().index());
      const c10::Storage& alias = alias_storage(t.storage());
      at::Tensor host = cpu_alias(t, alias);
      inputs_.push_back({host.unsafeGetTensorImpl(), t});
      if (is_write) writes_.push_back({t, host, alias.unsafeGetStorageImpl()});
      return host;
    }
    if (t.is_cpu()) {
      if (t.dim() > 0 && !t.unsafeGetTensorImpl()->is_wrapped_number()) saw_cpu_tensor_ = true;
      return t;
    }
    other_device_ = t.device();
    return t;
  }

  const c10::Storage& alias_storage(const c10::Storage& storage) {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    for (const auto& entry : storages_) {
      if (entry.neuron == impl) return entry.host;
    }
    storages_.push_back({impl, make_cpu_alias_storage(storage)});
    return storages_.back().host;
  }

  at::Tensor from_host(const at::Tensor& r) {
    if (!r.defined() || r.is_privateuseone()) return r;
    TORCH_CHECK(r.layout() == at::kStrided, op_.schema().name(), " returned a ", r.layout(),
                " tensor; the neuron device supports strided (dense) tensors only. Run this op "
                "on CPU tensors.");
    c10::TensorImpl* impl = r.unsafeGetTensorImpl();
    for (const auto& in : inputs_) {
      if (in.host == impl) return in.neuron;  // in-place / out=: the caller's tensor
    }
    c10::StorageImpl* storage = r.storage().unsafeGetStorageImpl();
    for (const auto& entry : storages_) {
      if (entry.host.unsafeGetStorageImpl() == storage) {
        return neuron_view(c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(
                               entry.neuron)),
                           r);  // a view of an input
      }
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
  c10::SmallVector<Input, 4> inputs_;
  c10::SmallVector<StorageAlias, 4> storages_;
  c10::SmallVector<Write, 2> writes_;
  c10::SmallVector<Fresh, 2> fresh_;
  c10::SmallVector<size_t, 1> generator_slots_;
  c10::SmallVector<at::Generator, 1> generators_;
};

void neuron_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  g_host_kernel_calls.fetch_add(1, std::memory_order_relaxed);
  HostCall call(op);
  call.convert_arguments(stack);
  call.bind_generators(stack);
  const size_t num_returns = op.schema().returns().size();
  {
    // Counts the op, times the core, and backs the kernel's allocations with device memory.
    OpScope scope(op_slot(op), call.device());
    auto locks = call.lock_generators();
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    call.advance_generators(stack, num_returns);
  }
  call.sync_written_arguments();
  call.convert_returns(stack, num_returns);
}

// Ops that branch on the device type inside a composite kernel; on neuron they
// must take the CPU branch to run the CPU kernels.
const char* kDeviceBranchingComposites[] = {
    "convolution", "convolution_backward", "_convolution", "_convolution.deprecated",
    "mode.values",
};

// Kept on their composite (or explicit) kernels: device transfers and
// creation must stay on neuron.
bool keep_composite(const c10::OperatorHandle& op) {
  static const std::unordered_set<std::string> keep = {
      "aten::_to_copy", "aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize",
      "aten::clone", "aten::lift", "aten::lift_fresh", "aten::lift_fresh_copy",
      "aten::_pin_memory", "aten::is_pinned", "aten::pin_memory", "aten::record_stream",
      "aten::_local_scalar_dense", "aten::item", "aten::_has_compatible_shallow_copy_type",
      "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty",
      "aten::new_empty_strided", "aten::resize_", "aten::set_", "aten::to",
      "aten::_fused_sdp_choice", "aten::is_set_to", "aten::_nested_tensor_from_mask"};
  const auto& schema = op.schema();
  if (keep.count(schema.name())) return true;
  // View ops keep their composite: it builds the view with as_strided/view.
  for (const auto& ret : schema.returns()) {
    if (ret.alias_info() != nullptr && !ret.alias_info()->isWrite()) return true;
  }
  return false;
}

std::mutex g_route_mutex;
std::vector<std::string> g_routed;
torch::Library* g_route_library = nullptr;

std::string overload_name(const c10::OperatorName& name) {
  std::string out = name.name.substr(name.name.find("::") + 2);
  if (!name.overload_name.empty()) out += "." + name.overload_name;
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
}

void register_routed_ops() {
  std::lock_guard<std::mutex> lock(g_route_mutex);
  if (g_route_library != nullptr) return;
  g_route_library = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1,
                                       __FILE__, __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  std::unordered_set<std::string> forced;
  for (const char* name : kDeviceBranchingComposites) forced.insert(name);
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto handle = dispatcher.findOp(name);
    if (!handle.has_value()) continue;
    const std::string short_name = overload_name(name);
    if (handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;
    const bool composite =
        handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
        handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional);
    const bool cpu_kernel = handle->hasKernelForDispatchKey(c10::DispatchKey::CPU);
    // CompositeImplicit too: a handful of ops (mish_backward,
    // native_channel_shuffle) have a CPU kernel that CPU runs instead of it.
    const bool implicit =
        handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
    const bool route = forced.count(short_name) > 0 || ((composite || implicit) && cpu_kernel);
    if (!route || keep_composite(*handle)) continue;
    g_route_library->impl(short_name.c_str(),
                          torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
    g_routed.push_back(name.name + (name.overload_name.empty() ? "" : "." + name.overload_name));
  }
}

std::vector<std::string> routed_op_names() {
  std::lock_guard<std::mutex> lock(g_route_mutex);
  return g_routed;
}

int64_t host_kernel_calls() { return g_host_kernel_calls.load(); }

}  // namespace torch_neuronx
