// Clean interpreter exit after a backward pass.
//
// Autograd runs the nodes of a non-CPU device on a per-device worker thread.
// After waking the caller, the worker drops its reference to the finished
// GraphTask, which owns a Python contextvars snapshot. If the interpreter is
// already finalizing at that moment, taking the GIL makes CPython unwind the
// worker thread and std::terminate aborts the process (a PyTorch race that any
// non-CPU device triggers). Running one tiny backward per used device at exit,
// while the interpreter is alive and without the GIL, lets each worker finish
// every earlier GraphTask first: workers handle their queue in order.
#include "neuron_core.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/ones.h>
#include <c10/core/AutogradState.h>
#include <c10/core/DeviceGuard.h>
#include <torch/csrc/autograd/autograd.h>

namespace torch_neuronx {

void drain_autograd_workers() {
  if (in_bad_fork()) return;
  const c10::DeviceIndex count = device_count();
  // The drain must go through the per-device worker queues, even when this
  // thread runs its own backward passes inline (multithreading disabled).
  auto& autograd_state = c10::AutogradState::get_tls_state();
  const bool was_multithreaded = autograd_state.get_multithreading_enabled();
  autograd_state.set_multithreading_enabled(true);
  for (c10::DeviceIndex i = 0; i < count; ++i) {
    if (!is_used(i)) continue;
    try {
      c10::DeviceGuard guard(c10::Device(kNeuron, i));
      at::AutoGradMode grad_mode(true);
      auto leaf = at::ones({1}, at::TensorOptions().device(kNeuron, i)).requires_grad_(true);
      auto loss = (leaf * 2).sum();
      torch::autograd::backward({loss});
    } catch (...) {
      // Exit must never fail; a core that cannot run is simply skipped.
    }
  }
  autograd_state.set_multithreading_enabled(was_multithreaded);
}

}  // namespace torch_neuronx
