"""The cost model's view of the hardware: one *logical* NeuronCore of an instance type.

All figures come from the one hardware description (`neuron_hardware`, sources next to each
figure) through its one per-logical-core view (`neuron_hardware.logical_core_view`): LNC=2 pairs
two physical cores, so a logical core has twice their engines and HBM bandwidth. The instance and
LNC are resolved as the runtime resolves them (runtime/_logical_core.py). Efficiencies and launch
costs are assumptions (assumptions.py), never facts.
"""
from __future__ import annotations

from dataclasses import dataclass

import neuron_hardware

from . import assumptions as assumptions_mod
from ..runtime import resolve

# torch dtype names -> the TensorEngine rate they run at. Integer matmuls have no integer
# datapath and run in fp32 (docs/hardware-sources.md A1); float64 has no native type (docs/hardware-sources.md A1: unverified): fp32.
_TENSOR_DTYPE = {
    "bfloat16": "bfloat16", "float16": "float16", "float32": "float32", "tf32": "tf32",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
    "float8_e4m3fnuz": "float8_e4m3fnuz", "float8_e5m2fnuz": "float8_e5m2fnuz",
    "float64": "float32", "int8": "float32", "uint8": "float32", "int16": "float32",
    "int32": "float32", "int64": "float32", "bool": "float32",
    "complex64": "float32", "complex128": "float32",
    # MX block scales: no arithmetic dtype of their own; their elementwise ops counted at fp32 rates
    "float8_e8m0fnu": "float32",
}
LOW_PRECISION = {"bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                 "float8_e5m2fnuz"}


def dtype_name(dtype) -> str:
    """'bfloat16' for torch.bfloat16 or 'bfloat16'; raises naming the valid dtypes."""
    name = str(dtype).replace("torch.", "")
    if name not in _TENSOR_DTYPE:
        raise ValueError(f"dtype {dtype!r} is not modelled; use one of: {', '.join(sorted(_TENSOR_DTYPE))}")
    return name


@dataclass(frozen=True)
class Hardware(neuron_hardware.OnLogicalCore):   # .instance, .lnc, .chip: the view's
    view: neuron_hardware.LogicalCoreView
    assumptions: assumptions_mod.Assumptions

    name = neuron_hardware.view_attribute("name")                        # "trn2.48xlarge LNC=2"
    logical_cores_per_chip = neuron_hardware.view_attribute("cores_per_chip")
    logical_cores = neuron_hardware.view_attribute("cores_per_instance")   # per instance

    def tensor_flops(self, dtype) -> float:
        """Dense TensorEngine peak FLOP/s of one logical core for `dtype`."""
        return self.view.tensor_peak(_TENSOR_DTYPE[dtype_name(dtype)])

    def tensor_rate(self, rate: str, op: str = "this op") -> float:
        """Dense TensorEngine peak FLOP/s of one logical core for a named rate of the hardware
        table ("mxfp8"); raises ValueError where this chip's TensorE lacks it."""
        if rate not in self.chip.tensor_flops:
            having = [c.name for c in neuron_hardware.CHIPS.values() if rate in c.tensor_flops]
            raise ValueError(
                f"{op} runs at the TensorE's {rate.upper()} rate, which {self.name} ({self.chip.name}, "
                f"{self.chip.core_version}) lacks; chips with it: {', '.join(having) or 'none'}. Estimate "
                f"for one of them (instance_type=, --instance or TORCH_NEURONX_INSTANCE_TYPE, e.g. "
                f"{having[0] + '.3xlarge' if having else 'trn3.3xlarge'}), or use a format this chip has")
        return self.view.tensor_peak(rate)

    @property
    def peak_flops_bf16(self) -> float:
        return self.tensor_flops("bfloat16")

    @property
    def hbm_bytes_per_s(self) -> float:
        """HBM bandwidth of one logical core: the chip's split over its physical cores (docs/hardware-sources.md C1)."""
        return self.view.hbm_bytes_per_s

    def vector_elems_per_s(self, dtype, inputs: int = 1) -> float:
        """VectorE element rate of one logical core: 128 lanes x clock, N cycles per one-input and
        2N per two-input instruction; trn2+ perf mode 4x / 2x for bf16/fp16 (docs/hardware-sources.md C1-isa,
        nki/simulator/cost.py: the same rule the simulator charges)."""
        rate = self.chip.partitions * self.chip.dve_ghz * 1e9 * self.lnc / max(1, min(inputs, 2))
        if self.chip.dve_perf_mode and dtype_name(dtype) in ("bfloat16", "float16"):
            rate *= 2 if inputs >= 2 else 4
        return rate

    def scalar_elems_per_s(self, dtype) -> float:
        """ScalarE element rate: 128 lanes x clock; trn3 2x for bf16/fp16/fp8 (docs/hardware-sources.md C1, engine clocks and widths)."""
        rate = self.chip.partitions * self.chip.act_ghz * 1e9 * self.lnc
        if self.chip.act_lowp_x2 and dtype_name(dtype) in LOW_PRECISION:
            rate *= 2
        return rate

    def describe(self) -> dict:
        return {"instance": self.instance.name, "chip": self.chip.name, "lnc": self.lnc,
                "peak_bf16_flops": self.peak_flops_bf16, "peak_fp32_flops": self.tensor_flops("float32"),
                "hbm_bytes_per_s": self.hbm_bytes_per_s, "logical_cores": self.logical_cores}


def hardware(instance_type: str | None = None, lnc: int | None = None, *,
             assumptions: dict | None = None) -> Hardware:
    """The cost model's hardware: one logical core of `instance_type` at `lnc`.

    Args:
        instance_type: e.g. "trn2.48xlarge", "trn3.3xlarge"; default TORCH_NEURONX_INSTANCE_TYPE,
            else trn2.3xlarge. Does not start the device.
        lnc: 1 or 2; default NEURON_LOGICAL_NC_CONFIG, else the chip's default (2 on trn2/trn3).
        assumptions: overrides of the named assumptions (see assumptions.py).
    """
    return hardware_of(resolve(instance_type, lnc, instance_arg="instance_type"), assumptions)


def hardware_of(view: neuron_hardware.LogicalCoreView, assumptions: dict | None = None) -> Hardware:
    """The cost model's hardware for a resolved logical core (runtime._logical_core.resolve)."""
    return Hardware(view, assumptions_mod.resolve(assumptions))
