"""TorchTitan's debug models on neuron, offline: the PyPI release of TorchTitan, unchanged.

Llama 3 by default; `--module torchtitan_neuron_configs --config qwen3_debugmodel_varlen` (or
`deepseek_v3_debugmodel_varlen`, from torchtitan_neuron_configs.py next to this script) and
`--module gpt_oss --config gpt_oss_debugmodel` pick TorchTitan's other documented models.

    torchrun --nproc-per-node=2 examples/torchtitan_llama3_debug.py                     # FSDP2 over 2 cores
    torchrun --nproc-per-node=4 examples/torchtitan_llama3_debug.py \\
        --parallelism.tensor-parallel-degree 2 --compile.enable --compile.backend neuron  # TP x FSDP, compiled
    torchrun --nproc-per-node=2 examples/torchtitan_llama3_debug.py --device cpu         # the CPU/gloo reference
    torchrun --nproc-per-node=2 examples/torchtitan_llama3_debug.py --module graph_trainer.llama3 \\
        --config graph_trainer_llama3_debugmodel_sdpa --compile.mode jit --compile.backend neuron  # SimpleFSDP

Anything after the script name is a TorchTitan argument and overrides the defaults below (its
`--module llama3 --config llama3_debugmodel_varlen_attn`, a tiny local tokenizer and dataset built by
`torchtitan_tiny_assets.py`, fp32 weights, seed 0, deterministic, 64-token sequences, 3 steps, no
activation checkpointing unless an `activation-checkpoint:...` argument is given). This is
the same as running `python -m torchtitan.train` with those arguments, plus what torch 2.13 and a
CPU-only host need (each below says why):

* TorchTitan chooses the device itself (`torch._utils._get_available_device_type()`: "neuron" here) and
  the process-group backend from it ("neuron"); `NGPU`/`--nproc-per-node` is the number of NeuronCores.
* `varlen` attention: the debug model's default, FlexAttention, has no backward on CPU in torch 2.13
  and accepts only CUDA/CPU/XPU/HPU/MPS tensors, so neither neuron nor the CPU reference can train it.
  varlen's `aten::_flash_attention_forward/backward` run on neuron (torch_neuronx/kernels/flash_varlen.py).
* `--parallelism.spmd-backend partial_dtensor`: the default, "spmd_types", hands FSDP2 plain tensors
  with `dp_mesh_dims`, which torch 2.13's `fully_shard` refuses ("all parameters must be DTensors on
  the full SPMD mesh") on every device; "partial_dtensor" is TorchTitan's DTensor-for-model-parallel path.
* `torch.distributed.set_timeout`, which TorchTitan 0.3.0 calls after the first step
  (torchtitan/distributed/utils.py:595), is newer than torch 2.13; where it is missing it is provided
  from torch's own `_set_pg_timeout`.
* pipeline parallelism: TorchTitan 0.3.0 gives the schedule its own micro-batches
  (`step(arg_mbs=, kwarg_mbs=, target_mbs=)`, torchtitan/trainer.py:856), which torch 2.13's schedules
  do not take (they split a whole batch themselves); where missing, the given micro-batches stand in for
  that split.
* `--device cpu` (the reference run, not a TorchTitan option): TorchTitan has no CPU device setting (it
  falls back to "cuda", torchtitan/tools/utils.py:55), so the device query is answered "cpu" before
  TorchTitan is imported, its device module is torch.cpu with the memory-monitor calls it expects
  (a name, a capacity, empty statistics), and the neuron varlen kernels are registered for CPU tensors as well, so both
  runs compute attention with the same formulation; CPU collectives go over gloo through the "neuron"
  group (FSDP2's PREMUL_SUM reduce-scatter is not in gloo). `torch.autocast("cpu", dtype=torch.float32)`
  (TorchTitan's MoE router gate asks for float32 this way) runs its region's matmuls in float32, as
  neuron and CUDA autocast do; CPU autocast itself refuses float32 and would leave them in bf16.
  The local dataset is used whatever the config names (`--dataloader.dataset c4_test`).
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ASSETS = os.environ.get("TITAN_ASSETS", "/tmp/torchtitan-tiny-assets")


def default_args(assets: str, dump_folder: str) -> list[str]:
    return ["--module", "llama3", "--config", "llama3_debugmodel_varlen_attn",
            "--hf-assets-path", f"{assets}/tokenizer",
            "--dataloader.dataset", "c4_test", "--dataloader.dataset-path", f"{assets}/c4_test",
            "--training.seq-len", "64", "--training.local-batch-size", "2", "--training.steps", "3",
            "--lr-scheduler.warmup-steps", "1", "--training.mixed-precision-param", "float32",
            "--debug.seed", "0", "--debug.deterministic", "--metrics.log-freq", "1",
            "--parallelism.spmd-backend", "partial_dtensor",
            "--checkpoint.no-enable", "--validator.no-enable", "--dump-folder", dump_folder]


def _set_timeout_for_torch_2_13() -> None:
    import torch.distributed as dist

    if not hasattr(dist, "set_timeout"):
        dist.set_timeout = dist.distributed_c10d._set_pg_timeout


def _pipeline_step_with_microbatches(step):
    """`step(arg_mbs=, kwarg_mbs=, target_mbs=)` on a torch 2.13 pipeline schedule, whose `step` takes the
    whole batch and splits it itself: the given microbatches stand in for that split."""

    def wrapped(self, *args, arg_mbs=None, kwarg_mbs=None, target_mbs=None, **kwargs):
        if arg_mbs is None and kwarg_mbs is None and target_mbs is None:
            return step(self, *args, **kwargs)
        n, run = self._n_microbatches, self._step_microbatches
        self._split_inputs = lambda a, k: (arg_mbs if arg_mbs is not None else [()] * n,
                                           kwarg_mbs if kwarg_mbs is not None else [{}] * n)
        self._step_microbatches = lambda a, k, _t, *rest, **kw: run(a, k, target_mbs, *rest, **kw)
        try:
            return step(self, *args, **kwargs)
        finally:  # instance attributes: deleting them uncovers the class's methods again
            del self._split_inputs, self._step_microbatches

    return wrapped


def _pipeline_microbatches_for_torch_2_13() -> None:
    import inspect

    from torch.distributed.pipelining import schedules

    for cls in (schedules.PipelineScheduleSingle, schedules.PipelineScheduleMulti):
        if "arg_mbs" not in inspect.signature(cls.step).parameters:
            cls.step = _pipeline_step_with_microbatches(cls.step)


class _CpuDeviceModule:
    """torch.cpu plus the few torch.cuda-style calls TorchTitan's memory monitor makes (it has no CPU
    path): a device name, a capacity, and empty memory statistics."""

    def __getattr__(self, name):
        import torch

        return getattr(torch.cpu, name)

    @staticmethod
    def get_device_name(device=None) -> str:
        return "cpu"

    @staticmethod
    def current_device() -> int:  # an index, as barrier(device_ids=[...]) takes (torch.cpu answers "cpu")
        return 0

    @staticmethod
    def get_device_properties(device=None):
        import types

        return types.SimpleNamespace(name="cpu", total_memory=os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))

    @staticmethod
    def memory_stats(device=None) -> dict:
        return {}

    @staticmethod
    def reset_peak_memory_stats(device=None) -> None:
        return None

    @staticmethod
    def empty_cache() -> None:
        return None


class _Float32Matmuls:
    """What `torch.autocast(device, dtype=torch.float32)` does on neuron (and CUDA) to a bf16 model: its
    matmuls run in float32. CPU autocast refuses float32 (it warns and stays off), so without this the CPU
    reference would compute in bf16 what neuron computes in float32, e.g. TorchTitan's MoE router gate
    (torchtitan/models/common/moe.py:298)."""

    _MATMULS = frozenset({"linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "addmv", "mv"})

    def __enter__(self):
        import torch
        from torch.overrides import TorchFunctionMode

        matmuls = self._MATMULS

        class Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                if getattr(func, "__name__", None) in matmuls:
                    def up(t):
                        return t.float() if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                    args, kwargs = [up(a) for a in args], {k: up(v) for k, v in (kwargs or {}).items()}
                return func(*args, **(kwargs or {}))

        self._mode = Mode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        return self._mode.__exit__(*exc)


def _cpu_autocast_float32() -> None:
    import torch

    real = torch.autocast

    def autocast(device_type, dtype=None, enabled=True, cache_enabled=None):
        if device_type == "cpu" and dtype == torch.float32 and enabled:
            return _Float32Matmuls()
        return real(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    torch.autocast = autocast


def _use_cpu() -> None:
    import torch
    import torch._utils
    import torch.distributed

    from torch_neuronx.kernels import flash_varlen

    # TorchTitan reads the device once, when torchtitan.tools.utils is imported; answer "cpu" for that
    # import only (torch's checkpoint writer asks the same question later and must get torch's answer).
    real_type, real_module = torch._utils._get_available_device_type, torch._utils._get_device_module
    torch._utils._get_available_device_type = lambda: "cpu"
    torch._utils._get_device_module = lambda t=None: _CpuDeviceModule() if t == "cpu" else real_module(t)
    try:
        import torchtitan.tools.utils  # noqa: F401
    finally:
        torch._utils._get_available_device_type, torch._utils._get_device_module = real_type, real_module
    # gloo itself refuses the PREMUL_SUM reduce-scatter that FSDP2 issues; the "neuron" group takes CPU
    # tensors too and runs them over gloo, with PREMUL_SUM as SUM and a scale.
    torch.distributed.Backend.default_device_backend_map["cpu"] = "neuron"
    _cpu_autocast_float32()
    lib = torch.library.Library("aten", "IMPL")
    flash_varlen.register(lib, "CPU")
    _use_cpu.lib = lib  # kept alive: dropping a Library unregisters it


# this script's option and the two TorchTitan reads before its config's options (its --help lists neither)
OWN_OPTIONS = """\
options of this script and TorchTitan's config selection (TorchTitan's options for that config follow):
  --device {neuron,cpu}  neuron (default), or cpu: the CPU/gloo reference run of the same command
  --module MODULE        the module holding TorchTitan's config registry (default llama3; also gpt_oss,
                         qwen3, deepseek_v3, graph_trainer.llama3, torchtitan_neuron_configs next to this script)
  --config NAME          the config function in that module (default llama3_debugmodel_varlen_attn)
"""


def main(argv: list[str]) -> None:
    sys.path.insert(0, HERE)
    from torchtitan_tiny_assets import ensure_assets

    if "-h" in argv or "--help" in argv:
        print(OWN_OPTIONS)   # then TorchTitan's own --help, for the config --module/--config pick
    device = "neuron"
    if "--device" in argv:
        i = argv.index("--device")
        device = argv[i + 1]
        del argv[i:i + 2]
    if device == "cpu":
        _use_cpu()
    ensure_assets(ASSETS)
    _set_timeout_for_torch_2_13()
    _pipeline_microbatches_for_torch_2_13()
    if not any(a.startswith("activation-checkpoint:") for a in argv):
        argv = argv + ["activation-checkpoint:none"]  # a tyro subcommand: it must come last
    sys.argv = [sys.argv[0]] + default_args(ASSETS, os.environ.get("TITAN_DUMP", f"/tmp/torchtitan-{device}")) + argv
    from torchtitan.train import main as titan_main

    titan_main()


if __name__ == "__main__":
    main(sys.argv[1:])
