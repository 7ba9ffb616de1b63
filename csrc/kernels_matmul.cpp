// Direct neuron kernels for the matmul family and CPU attention.
//
// Compiled graphs call these as extern kernels (often with out=), and eager
// models call them constantly. They run the same CPU kernels as the generic
// fallback, but unboxed: no IValue rewriting, no schema walk, no dispatcher
// round trip to the CPU kernel (at::cpu:: calls it directly). Their host
// aliases come from the thread's alias cache (host_aliases.h): weights and
// saved activations are the same tensors call after call.
#include "host_aliases.h"
#include "neuron_core.h"
#include "tools_core.h"

#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward_cpu_dispatch.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_cpu_dispatch.h>
#include <ATen/ops/addmm_cpu_dispatch.h>
#include <ATen/ops/baddbmm_cpu_dispatch.h>
#include <ATen/ops/bmm_cpu_dispatch.h>
#include <ATen/ops/mm_cpu_dispatch.h>
#include <torch/library.h>

#include <atomic>
#include <initializer_list>
#include <utility>

namespace torch_neuronx {
namespace {

// Counts the op for torch_neuronx.get_executed_ops() and times the core.
#define NEURON_TRACK_OP(name, dev)                  \
  static OpSlot* const op_slot_ = named_op_slot(name); \
  OpScope op_scope_(op_slot_, dev)

// The one neuron device all tensor arguments live on, with CUDA's message when
// they do not (0-dim CPU tensors are allowed, as on CUDA).
// The errors are out of line: this check runs before every matmul and attention call,
// and its message-building code would otherwise sit between the few lines it executes.
[[noreturn]] C10_NOINLINE void raise_device_mismatch(const char* op, int device, const at::Tensor& t) {
  if (t.is_privateuseone()) {
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, "
                "neuron:", device, " and neuron:", int(t.device().index()), "! (when checking arguments for ",
                op, "). Move them with .to(device).");
  }
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two "
              "devices, neuron and ", t.device(), "! (when checking arguments for ", op, ").");
  C10_THROW_ERROR(Error, "unreachable");
}

[[noreturn]] C10_NOINLINE void raise_no_neuron_argument(const char* op) {
  TORCH_CHECK(false, op, ": no neuron tensor argument");
  C10_THROW_ERROR(Error, "unreachable");
}

c10::DeviceIndex common_device(const char* op, std::initializer_list<const at::Tensor*> tensors) {
  int device = -1;
  for (const at::Tensor* t : tensors) {
    if (t == nullptr || !t->defined()) continue;
    if (C10_LIKELY(t->is_privateuseone())) {
      const int idx = t->device().index();
      if (C10_UNLIKELY(device >= 0 && device != idx)) raise_device_mismatch(op, device, *t);
      device = idx;
    } else if (!(t->is_cpu() && t->dim() == 0)) {
      raise_device_mismatch(op, device, *t);
    }
  }
  if (C10_UNLIKELY(device < 0)) raise_no_neuron_argument(op);
  return static_cast<c10::DeviceIndex>(device);
}

// An out= argument as a host alias (one of `aliases`), remembering its alias
// storage. An input that shares memory with it gets the same host storage
// from `aliases`, so the CPU kernel's overlap checks see what they would on CPU.
struct HostOut {
  at::Tensor host;
  const c10::StorageImpl* alias_storage;
  HostOut(HostAliases& aliases, const at::Tensor& out)
      : host(aliases.of(out)), alias_storage(host.storage().unsafeGetStorageImpl()) {}
};


// ---- bf16/fp16 GEMMs with fp32 accumulation -------------------------------
// Where the host CPU has no native bf16 (fp16) dot product, its bf16 (fp16)
// GEMM is a scalar loop, tens of times slower than its fp32 GEMM. The policy
// (torch_neuronx/runtime/host_gemm.py) then sets these flags: each operand is
// converted to fp32 once (O(n^2)), one fp32 GEMM runs (O(n^3)), and the result
// is rounded to the operands' dtype once, as a NeuronCore's TensorEngine does
// (bf16 inputs, fp32 accumulation in PSUM, one rounding). CPU flash attention's
// block GEMMs are the same bf16/fp16 GEMMs, so it follows the same flags.
std::atomic<bool> g_fp32_bf16{false};
std::atomic<bool> g_fp32_fp16{false};

// True when every defined operand has one low-precision dtype whose policy is fp32.
// Mixed dtypes keep the CPU kernel (and its error message).
bool takes_fp32_path(std::initializer_list<const at::Tensor*> tensors) {
  at::ScalarType dtype = at::ScalarType::Undefined;
  for (const at::Tensor* t : tensors) {
    if (!t->defined()) continue;
    if (dtype == at::ScalarType::Undefined) {
      dtype = t->scalar_type();
    } else if (t->scalar_type() != dtype) {
      return false;
    }
  }
  if (dtype == at::kBFloat16) return g_fp32_bf16.load(std::memory_order_relaxed);
  if (dtype == at::kHalf) return g_fp32_fp16.load(std::memory_order_relaxed);
  return false;
}

at::Tensor up(const at::Tensor& t) { return t.defined() ? t.to(at::kFloat) : t; }

// An attention mask in the operands' dtype goes to fp32 with them; a boolean mask stays.
std::optional<at::Tensor> up_like(const std::optional<at::Tensor>& mask, const at::Tensor& like) {
  if (mask.has_value() && mask->defined() && mask->scalar_type() == like.scalar_type()) return up(*mask);
  return mask;
}

// An out= result computed in fp32 is rounded into `out` when `out` already has
// the result's size and dtype (compiled graphs always pass such buffers);
// otherwise the CPU kernel runs, with its resize and dtype rules.
bool out_fits(const at::Tensor& out, at::IntArrayRef sizes, const at::Tensor& like) {
  return out.scalar_type() == like.scalar_type() && out.sizes() == sizes;
}

// The operand casts a GEMM body is called with: fp32 (Up) or as they are (Same).
struct Up {
  at::Tensor operator()(const at::Tensor& t) const { return up(t); }
};
struct Same {
  const at::Tensor& operator()(const at::Tensor& t) const { return t; }
};

// A functional GEMM: on the fp32 path `gemm(Up{})` runs on fp32 operands and its result is
// rounded to `dtype` once; otherwise `gemm(Same{})` runs the CPU kernel on the host aliases.
template <typename Gemm>
at::Tensor gemm_result(bool fp32, at::ScalarType dtype, c10::DeviceIndex dev, Gemm gemm) {
  if (fp32) return adopt_host_result(gemm(Up{}).to(dtype), dev);
  return adopt_host_result(gemm(Same{}), dev);
}

// An out= or in-place GEMM writing `out`: `fp32(host)` (a GEMM on fp32 operands; `host` is out's
// host alias, the accumulator of the in-place forms) is rounded into `out` once when `fp32_fits`,
// else `native(host)` runs the CPU out= / in-place kernel. Out's alias is taken before the
// operands', so an operand sharing its memory gets the same host storage (the CPU overlap checks).
template <typename Fp32, typename Native>
at::Tensor& gemm_into(at::Tensor& out, c10::DeviceIndex dev, HostAliases& a, bool fp32_fits, Fp32 fp32,
                      Native native) {
  HostOut host(a, out);
  if (fp32_fits) {
    host.host.copy_(fp32(host.host));
  } else {
    native(host.host);
  }
  sync_written_output(out, host.host, host.alias_storage, dev);
  return out;
}

at::Tensor neuron_mm(const at::Tensor& self, const at::Tensor& mat2) {
  const auto dev = common_device("aten::mm", {&self, &mat2});
  NEURON_TRACK_OP("aten::mm", dev);
  HostAliases a;
  return gemm_result(takes_fp32_path({&self, &mat2}), self.scalar_type(), dev,
                     [&](auto cast) { return at::cpu::mm(cast(a.of(self)), cast(a.of(mat2))); });
}

at::Tensor& neuron_mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  const auto dev = common_device("aten::mm.out", {&self, &mat2, &out});
  NEURON_TRACK_OP("aten::mm.out", dev);
  HostAliases a;
  const bool fp32 = takes_fp32_path({&self, &mat2}) && self.dim() == 2 && mat2.dim() == 2 &&
                    out_fits(out, {self.size(0), mat2.size(1)}, self);
  return gemm_into(
      out, dev, a, fp32, [&](const at::Tensor&) { return at::cpu::mm(up(a.of(self)), up(a.of(mat2))); },
      [&](at::Tensor& host) { at::cpu::mm_out(host, a.of(self), a.of(mat2)); });
}

at::Tensor neuron_bmm(const at::Tensor& self, const at::Tensor& mat2) {
  const auto dev = common_device("aten::bmm", {&self, &mat2});
  NEURON_TRACK_OP("aten::bmm", dev);
  HostAliases a;
  return gemm_result(takes_fp32_path({&self, &mat2}), self.scalar_type(), dev,
                     [&](auto cast) { return at::cpu::bmm(cast(a.of(self)), cast(a.of(mat2))); });
}

at::Tensor& neuron_bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  const auto dev = common_device("aten::bmm.out", {&self, &mat2, &out});
  NEURON_TRACK_OP("aten::bmm.out", dev);
  HostAliases a;
  const bool fp32 = takes_fp32_path({&self, &mat2}) && self.dim() == 3 && mat2.dim() == 3 &&
                    out_fits(out, {self.size(0), self.size(1), mat2.size(2)}, self);
  return gemm_into(
      out, dev, a, fp32, [&](const at::Tensor&) { return at::cpu::bmm(up(a.of(self)), up(a.of(mat2))); },
      [&](at::Tensor& host) { at::cpu::bmm_out(host, a.of(self), a.of(mat2)); });
}

at::Tensor neuron_addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                        const at::Scalar& beta, const at::Scalar& alpha) {
  const auto dev = common_device("aten::addmm", {&self, &mat1, &mat2});
  NEURON_TRACK_OP("aten::addmm", dev);
  HostAliases a;
  return gemm_result(takes_fp32_path({&self, &mat1, &mat2}), mat1.scalar_type(), dev, [&](auto cast) {
    return at::cpu::addmm(cast(a.of(self)), cast(a.of(mat1)), cast(a.of(mat2)), beta, alpha);
  });
}

at::Tensor& neuron_addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                             const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  const auto dev = common_device("aten::addmm.out", {&self, &mat1, &mat2, &out});
  NEURON_TRACK_OP("aten::addmm.out", dev);
  HostAliases a;
  const bool fp32 = takes_fp32_path({&self, &mat1, &mat2}) && mat1.dim() == 2 && mat2.dim() == 2 &&
                    out_fits(out, {mat1.size(0), mat2.size(1)}, mat1);
  return gemm_into(
      out, dev, a, fp32,
      [&](const at::Tensor&) { return at::cpu::addmm(up(a.of(self)), up(a.of(mat1)), up(a.of(mat2)), beta, alpha); },
      [&](at::Tensor& host) { at::cpu::addmm_out(host, a.of(self), a.of(mat1), a.of(mat2), beta, alpha); });
}

at::Tensor neuron_baddbmm(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2,
                          const at::Scalar& beta, const at::Scalar& alpha) {
  const auto dev = common_device("aten::baddbmm", {&self, &b1, &b2});
  NEURON_TRACK_OP("aten::baddbmm", dev);
  HostAliases a;
  return gemm_result(takes_fp32_path({&self, &b1, &b2}), b1.scalar_type(), dev, [&](auto cast) {
    return at::cpu::baddbmm(cast(a.of(self)), cast(a.of(b1)), cast(a.of(b2)), beta, alpha);
  });
}

at::Tensor& neuron_baddbmm_out(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2,
                               const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  const auto dev = common_device("aten::baddbmm.out", {&self, &b1, &b2, &out});
  NEURON_TRACK_OP("aten::baddbmm.out", dev);
  HostAliases a;
  const bool fp32 = takes_fp32_path({&self, &b1, &b2}) && b1.dim() == 3 && b2.dim() == 3 &&
                    out_fits(out, {b1.size(0), b1.size(1), b2.size(2)}, b1);
  return gemm_into(
      out, dev, a, fp32,
      [&](const at::Tensor&) { return at::cpu::baddbmm(up(a.of(self)), up(a.of(b1)), up(a.of(b2)), beta, alpha); },
      [&](at::Tensor& host) { at::cpu::baddbmm_out(host, a.of(self), a.of(b1), a.of(b2), beta, alpha); });
}

// In-place forms (x.addmm_(a, b), x.baddbmm_(a, b)): the out= kernels with self as out.
at::Tensor& neuron_addmm_(at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                          const at::Scalar& beta, const at::Scalar& alpha) {
  const auto dev = common_device("aten::addmm_", {&self, &mat1, &mat2});
  NEURON_TRACK_OP("aten::addmm_", dev);
  HostAliases a;
  const bool fp32 = takes_fp32_path({&self, &mat1, &mat2}) && mat1.dim() == 2 && mat2.dim() == 2 &&
                    out_fits(self, {mat1.size(0), mat2.size(1)}, mat1);
  return gemm_into(
      self, dev, a, fp32,
      [&](const at::Tensor& host) { return at::cpu::addmm(up(host), up(a.of(mat1)), up(a.of(mat2)), beta, alpha); },
      [&](at::Tensor& host) { at::cpu::addmm_(host, a.of(mat1), a.of(mat2), beta, alpha); });
}

at::Tensor& neuron_baddbmm_(at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2,
                            const at::Scalar& beta, const at::Scalar& alpha) {
  const auto dev = common_device("aten::baddbmm_", {&self, &b1, &b2});
  NEURON_TRACK_OP("aten::baddbmm_", dev);
  HostAliases a;
  const bool fp32 = takes_fp32_path({&self, &b1, &b2}) && b1.dim() == 3 && b2.dim() == 3 &&
                    out_fits(self, {b1.size(0), b1.size(1), b2.size(2)}, b1);
  return gemm_into(
      self, dev, a, fp32,
      [&](const at::Tensor& host) { return at::cpu::baddbmm(up(host), up(a.of(b1)), up(a.of(b2)), beta, alpha); },
      [&](at::Tensor& host) { at::cpu::baddbmm_(host, a.of(b1), a.of(b2), beta, alpha); });
}

std::tuple<at::Tensor, at::Tensor> neuron_flash_attention(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropout_p,
    bool is_causal, const std::optional<at::Tensor>& attn_mask, std::optional<double> scale) {
  const at::Tensor* mask = attn_mask.has_value() ? &*attn_mask : nullptr;
  const auto dev = common_device("aten::_scaled_dot_product_flash_attention_for_cpu", {&q, &k, &v, mask});
  NEURON_TRACK_OP("aten::_scaled_dot_product_flash_attention_for_cpu", dev);
  HostAliases a;
  if (takes_fp32_path({&q, &k, &v})) {   // its block GEMMs are the CPU's bf16/fp16 GEMMs
    auto [out, lse] = at::cpu::_scaled_dot_product_flash_attention_for_cpu(
        up(a.of(q)), up(a.of(k)), up(a.of(v)), dropout_p, is_causal, up_like(a.of(attn_mask), q), scale);
    return {adopt_host_result(out.to(q.scalar_type()), dev), adopt_host_result(lse, dev)};
  }
  auto [out, lse] = at::cpu::_scaled_dot_product_flash_attention_for_cpu(
      a.of(q), a.of(k), a.of(v), dropout_p, is_causal, a.of(attn_mask), scale);
  return {adopt_host_result(out, dev), adopt_host_result(lse, dev)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> neuron_flash_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, double dropout_p, bool is_causal,
    const std::optional<at::Tensor>& attn_mask, std::optional<double> scale) {
  const at::Tensor* mask = attn_mask.has_value() ? &*attn_mask : nullptr;
  const auto dev = common_device("aten::_scaled_dot_product_flash_attention_for_cpu_backward",
                                 {&grad_out, &q, &k, &v, &out, &lse, mask});
  NEURON_TRACK_OP("aten::_scaled_dot_product_flash_attention_for_cpu_backward", dev);
  HostAliases a;
  if (takes_fp32_path({&grad_out, &q, &k, &v, &out})) {
    const auto dtype = q.scalar_type();
    auto [gq, gk, gv] = at::cpu::_scaled_dot_product_flash_attention_for_cpu_backward(
        up(a.of(grad_out)), up(a.of(q)), up(a.of(k)), up(a.of(v)), up(a.of(out)), a.of(lse), dropout_p,
        is_causal, up_like(a.of(attn_mask), q), scale);
    return {adopt_host_result(gq.to(dtype), dev), adopt_host_result(gk.to(dtype), dev),
            adopt_host_result(gv.to(dtype), dev)};
  }
  auto [gq, gk, gv] = at::cpu::_scaled_dot_product_flash_attention_for_cpu_backward(
      a.of(grad_out), a.of(q), a.of(k), a.of(v), a.of(out), a.of(lse), dropout_p, is_causal,
      a.of(attn_mask), scale);
  return {adopt_host_result(gq, dev), adopt_host_result(gk, dev), adopt_host_result(gv, dev)};
}

}  // namespace

void set_low_precision_gemm_fp32(bool bf16, bool fp16) {
  g_fp32_bf16.store(bf16, std::memory_order_relaxed);
  g_fp32_fp16.store(fp16, std::memory_order_relaxed);
}

bool low_precision_gemm_fp32_for(at::ScalarType dtype) {
  if (dtype == at::kBFloat16) return g_fp32_bf16.load(std::memory_order_relaxed);
  if (dtype == at::kHalf) return g_fp32_fp16.load(std::memory_order_relaxed);
  return false;
}

std::pair<bool, bool> low_precision_gemm_fp32() {
  return {g_fp32_bf16.load(std::memory_order_relaxed), g_fp32_fp16.load(std::memory_order_relaxed)};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm", TORCH_FN(neuron_mm));
  m.impl("mm.out", TORCH_FN(neuron_mm_out));
  m.impl("bmm", TORCH_FN(neuron_bmm));
  m.impl("bmm.out", TORCH_FN(neuron_bmm_out));
  m.impl("addmm", TORCH_FN(neuron_addmm));
  m.impl("addmm.out", TORCH_FN(neuron_addmm_out));
  m.impl("baddbmm", TORCH_FN(neuron_baddbmm));
  m.impl("baddbmm.out", TORCH_FN(neuron_baddbmm_out));
  m.impl("addmm_", TORCH_FN(neuron_addmm_));
  m.impl("baddbmm_", TORCH_FN(neuron_baddbmm_));
  m.impl("_scaled_dot_product_flash_attention_for_cpu", TORCH_FN(neuron_flash_attention));
  m.impl("_scaled_dot_product_flash_attention_for_cpu_backward",
         TORCH_FN(neuron_flash_attention_backward));
}

}  // namespace torch_neuronx
