// Random ops whose CPU kernel draws from the CPU default generator without a
// generator argument.
//
// The host fallback binds the neuron generator into an op's `Generator?`
// argument; an op without one would run CPU's kernel on CPU's default
// generator, so torch.neuron.manual_seed / get_rng_state / set_rng_state would
// not govern it. `dropout` on a neuron tensor takes the fused `native_dropout`
// (as on CUDA), which is such an op: here it is CPU's algorithm with the mask
// drawn by `bernoulli_` on the neuron tensor, i.e. from the neuron generator.
#include "neuron_core.h"

#include <ATen/ops/empty_like.h>
#include <ATen/ops/ones_like.h>
#include <torch/library.h>

namespace torch_neuronx {
namespace {

std::tuple<at::Tensor, at::Tensor> neuron_native_dropout(const at::Tensor& input, double p,
                                                         std::optional<bool> train) {
  if (input.numel() == 0) {
    return {input, at::empty_like(input)};
  }
  if (train.has_value() && !*train) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  const double keep = 1. - p;
  const double scale = keep == 0 ? 0. : 1. / keep;  // p == 1 drops everything, without 0 * inf
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
  mask.bernoulli_(keep);  // the neuron generator, through the fallback's generator binding
  at::Tensor output = input.mul(mask).mul_(scale);
  return {output, mask};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_dropout", TORCH_FN(neuron_native_dropout));
}

}  // namespace torch_neuronx
