"""torch.compile backend "neuron" (TorchNeuron's static-shape compiler).

Importing this package is cheap: Dynamo and Inductor are imported, and neuron
registered with them, at the first compile. `neuron_backend` is the entry point
of the `torch_dynamo_backends` group, so `torch.compile(m, backend="neuron")`
resolves it without importing anything first. `set_model_name`, `get_model_name` and `get_rank`
name the artifacts under TORCH_NEURONX_DEBUG_DIR; `NeuronCompileError` is what a failed compile
raises (fallback execution off); `vec_isa_ok()` says whether Inductor's vector ISAs all build here.
Every graph the backend produces is recorded (`compiled_graphs()`, a `GraphRecord` each: its cause,
size, cache key and warm-cache state; `count_graph_flops(who, on)` asks for FLOPs too): what
torch_neuronx.metrics and a plan's compile budget report.
`run_rng_ops_under(mode_class)` lets the RNG ops of activation checkpointing inside compiled graphs
run under a TorchDispatchMode (the cost model's and the dry run's modes register theirs).
"""
from __future__ import annotations

from ._compile_log import GraphRecord, count as compiled_graph_count, records as compiled_graphs
from ._compile_log import set_detail as count_graph_flops
from ._metrics import get_dynamo_metrics, reset_dynamo_metrics
from ._options import get_model_name, get_rank, set_model_name

__all__ = ["NeuronCompileError", "get_dynamo_metrics", "get_model_name", "get_rank", "neuron_backend", "register",
           "reset_dynamo_metrics", "set_model_name", "vec_isa_ok", "GraphRecord", "compiled_graphs",
           "compiled_graph_count", "count_graph_flops", "run_rng_ops_under"]


def __getattr__(name: str):
    # loading the error's module loads the backend (Dynamo): only on use
    if name == "NeuronCompileError":
        from ._backend import NeuronCompileError

        return NeuronCompileError
    raise AttributeError(f"module 'torch_neuronx.compiler' has no attribute {name!r}")


def neuron_backend(gm, example_inputs, **kwargs):
    """Dynamo backend: `torch.compile(model, backend="neuron", mode=..., options=...)`."""
    from ._backend import compile_graph

    return compile_graph(gm, example_inputs, **kwargs)


def vec_isa_ok() -> bool:
    """Whether every vector ISA Inductor advertises on this host builds and loads (Inductor's own
    probe, cached per process): a worker told so (TORCHINDUCTOR_VEC_ISA_OK) skips probing."""
    from ._vec_isa import all_advertised_valid

    return all_advertised_valid()


def run_rng_ops_under(mode_class) -> None:
    """Let torch's RNG higher-order ops (`run_and_save_rng_state`, `run_with_rng_state`: the
    recomputed region of activation checkpointing inside a compiled graph) run under the
    TorchDispatchMode class `mode_class`; the op inside them is seen by the mode (_rng_hops.py)."""
    from ._rng_hops import run_under

    run_under(mode_class)


def register() -> None:
    """Register neuron with Dynamo and Inductor now (otherwise done at first compile);
    afterwards `backend="inductor"` also compiles neuron graphs."""
    from ._registration import register as _register

    _register()
