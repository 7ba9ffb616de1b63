"""Registration of the neuron device with PyTorch, in the order PyTorch needs.

`register()` runs once per process, from `import torch` (autoload) or from
`import torch_neuronx`. It must never make `import torch` fail: on a broken
installation it leaves an unavailable `torch.neuron` and warns why.
"""
from __future__ import annotations

import atexit
import os
import sys
import types
import warnings

import torch

_state = {"done": False, "error": None}


def register() -> None:
    if _state["done"]:
        return
    _state["done"] = True
    try:
        _register_device()
    except Exception as err:  # noqa: BLE001 - autoload must not break `import torch`
        _state["error"] = f"{type(err).__name__}: {err}"
        warnings.warn(
            f"torch-neuronx could not register the neuron device ({_state['error']}); "
            "torch.neuron.is_available() is False. Reinstall torch-neuronx against the "
            f"installed torch {torch.__version__}.",
            RuntimeWarning,
            stacklevel=2,
        )
        _install_unavailable_module()


def _register_device() -> None:
    from . import _C, runtime  # loading _C registers allocator, guard, hooks, kernels

    runtime.start(_C)
    if torch._C._get_privateuse1_backend_name() != "neuron":
        torch.utils.rename_privateuse1_backend("neuron")
    from . import neuron

    torch._register_device_module("neuron", neuron)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_storage=True
    )
    _C._register_routed_ops()
    from .kernels import register as _register_python_kernels

    _register_python_kernels()  # torch.library kernels (shallow-copy type, RNN cells, SDPA hook)
    # The virtual core executes synchronously on the host, so autograd's
    # per-device worker threads only add a thread hand-off to every backward.
    # Run backward on the calling thread (as CPU does) for the importing
    # thread; other threads keep PyTorch's default, and the exit drain keeps
    # their worker threads from aborting the interpreter at exit.
    torch._C._set_multithreading_enabled(False)
    atexit.register(_C._drain_autograd_workers)
    from .runtime import _exit_guard as exit_guard

    atexit.register(exit_guard.stop_neuron_daemon_threads)  # atexit is LIFO: runs before the drain
    from .neuron import sharing

    sharing.install()  # neuron tensors through torch.multiprocessing arrive as copies
    from .compiler._default_backend import install as _route_default_compile

    _route_default_compile()  # torch.compile(f) with no backend= on neuron inputs: backend "neuron"
    _install_compiler_hooks(neuron)  # what the device layer and the compiler reach above them through
    from .distributed import register_backend as _register_c10d_backend

    if _register_c10d_backend():  # c10d backend "neuron"; the process group loads lazily
        _register_distributed_hooks()  # the dry run's group factory, the cost model's collective observer
    from .integrations import install as _install_hf_adapters

    _install_hf_adapters()  # post-import adapters for accelerate/transformers; imports nothing now
    from .numerics import install as _install_numerics

    _install_numerics()  # TORCH_NEURONX_NUMERICS: host installs nothing; check/trainium a dispatch mode
    from .compat._numerics_sweep import install as _install_sweep_models

    _install_sweep_models()  # the compatibility sweep's tiny models for `python -m torch_neuronx.numerics.sweep`
    if os.environ.get("TORCH_NEURONX_STRICT_OPS"):  # imports the strict op check only when asked for
        from .ops_support.strict import install as _install_strict_ops

        _install_strict_ops()  # raise at an op TorchNeuron does not support (docs/op-support.md)
        from .compiler import hooks as _compiler_hooks
        from .ops_support.strict import active as _strict_ops_active

        _compiler_hooks.op_by_op.register("strict ops", _strict_ops_active)  # the check sees compiled ops
    if os.environ.get("TORCH_NEURONX_DRY_RUN"):  # imports the planner only when asked for
        from .plan import install as _install_dry_run

        _install_dry_run()  # TORCH_NEURONX_DRY_RUN=1: phantom memory, shape-only ops (docs/plan.md)
    _install_compile_reports()


def _install_compile_reports() -> None:
    """torch_neuronx.metrics' switch and exit tables, and compile-only mode's budget at exit, each
    imported only when its variable is set (docs/compile-budget.md). A bad value is a warning here:
    registration must not fail."""
    try:
        if os.environ.get("TORCH_NEURONX_METRICS_ENABLED") or os.environ.get("TORCH_NEURONX_ENABLED_METRIC_TABLES"):
            from .metrics import install as _install_metrics

            _install_metrics()
        if os.environ.get("TORCH_NEURONX_COMPILE_ONLY"):
            from .plan import compile_only_report_at_exit

            compile_only_report_at_exit()
    except Exception as err:  # noqa: BLE001 - the message names the variable and the fix
        warnings.warn(f"{err} (torch_neuronx: metrics or compile-only report not installed)", RuntimeWarning,
                      stacklevel=2)


def _register_distributed_hooks() -> None:
    """The planner and the cost model into the distributed layer's hooks (distributed/hooks.py), in every
    process (`plan run` children and torchrun ranks too), whatever it switches on later: a test or
    `plan.enable()` may turn the dry run on after startup. Each imports its layer only when first needed.
    Numerics and the integrations register their own hooks when they install."""
    from .distributed import hooks

    hooks.set_group_factory(_dry_run_group)
    hooks.on_group_class(_cost_collectives)
    if os.environ.get("TORCH_NEURONX_DRY_RUN"):  # imports the planner only when asked for
        from .plan.distributed import install_if_dry_run

        install_if_dry_run()  # init_process_group rendezvouses with no peer (plan/distributed/_rendezvous.py)


def _dry_run_group(store, rank: int, size: int, timeout):
    """The dry run's fake group when TORCH_NEURONX_DRY_RUN is on (read at each new group), else None."""
    if not os.environ.get("TORCH_NEURONX_DRY_RUN"):  # imports the planner only when asked for
        return None
    from .plan.distributed import group_factory

    return group_factory(store, rank, size, timeout)


def _cost_collectives(cls: type) -> None:
    """Each collective of the group class `cls` on neuron tensors is costed inside torch_neuronx.estimate()."""
    from .estimate.collectives import observe_process_group

    observe_process_group(cls)


def _install_compiler_hooks(neuron) -> None:
    """Hooks the lower layers offer (docs/architecture.md, "Hooks"), filled with higher layers' code,
    which each loads only when first called. The numerics and the dry run register their own hooks
    when they install or start."""
    from .compiler import hooks, register as register_compiler

    neuron._set_inductor_registration(register_compiler)  # torch.neuron.Scheduling: Inductor met neuron first
    hooks.graph_observers.register("estimate", _observe_compiled_graph)


def _observe_compiled_graph(gm, compiled, name: str):
    """Each call of a compiled graph counts in neuron-top's graph counts and, inside
    torch_neuronx.estimate(), as one fused program (torch_neuronx/estimate/_graphs.py)."""
    from .estimate._graphs import observe

    return observe(gm, compiled, name)


def _install_unavailable_module() -> None:
    if hasattr(torch, "neuron"):
        return
    module = types.ModuleType("torch.neuron", "neuron device (unavailable: see the warning)")
    reason = _state["error"]

    def _unavailable(*args, **kwargs):
        raise RuntimeError(f"The neuron device is unavailable: {reason}")

    module.is_available = lambda: False
    module.device_count = lambda: 0
    module.is_initialized = lambda: False
    module._is_in_bad_fork = lambda: False
    module.current_device = _unavailable
    module.set_device = _unavailable
    module.manual_seed_all = lambda seed: None
    torch.neuron = module
    sys.modules["torch.neuron"] = module


def registration_error() -> str | None:
    return _state["error"]
