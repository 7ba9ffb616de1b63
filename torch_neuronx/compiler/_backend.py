"""The Dynamo backend "neuron": Dynamo graph -> static-shape checks -> compile
cache -> AOTAutograd + Inductor's C++ code generation for the virtual
NeuronCore (_registration.py) -> a callable running on neuron memory.
"""
from __future__ import annotations

import os
import time
import warnings

import torch

from . import _cache as cache, hooks, _kernel_libraries as kernel_libraries, _metrics as metrics, _passes as passes, _registration as registration
from . import _compile_log as compile_log, _options as options_mod


class NeuronCompileError(RuntimeError):
    """A graph could not be compiled for the neuron device (and fallback execution is off)."""


class NeuronDynamicShapesError(ValueError):
    """torch.compile(dynamic=True) was requested: neuron programs have static shapes."""


_DYNAMIC_MESSAGE = (
    "torch.compile(..., backend='neuron', dynamic=True) is not supported: neuron programs have static "
    "shapes. Use dynamic=False or leave dynamic unset; each new input shape then compiles its own graph "
    "(pad inputs to a few fixed sizes, e.g. multiples of 128, to keep the number of graphs small)."
)
_RECOMPILE_ADVICE = (
    "{fn} has been recompiled {n} times because its input shapes keep changing (last: {reason}). "
    "Neuron graphs are static: pad sequence lengths to a multiple of 128, use a static KV cache "
    "(cache_implementation='static') and, for long prompts, prefill_chunk_size, so a few shapes repeat."
)

_last_signature: dict[str, list] = {}


def _function_name(gm: torch.fx.GraphModule) -> tuple[str, str]:
    """(identity of the compiled Python function, short graph name)."""
    from torch._guards import CompileContext, TracingContext

    compile_id = CompileContext.current_compile_id()
    tc = TracingContext.try_get()
    code = tc.traced_code[0] if tc is not None and getattr(tc, "traced_code", None) else None
    if code is not None:
        fn = f"{code.co_name} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"
        short = code.co_name
    else:
        fn = short = f"frame {compile_id.frame_id if compile_id else '?'}"
    suffix = f"{compile_id.frame_id}_{compile_id.frame_compile_id}" if compile_id is not None else "x"
    return fn, f"{short}_{suffix}"


def _shape_signature(inputs) -> list:
    # symbolic sizes passed as graph inputs are left out: only tensors are compared
    return [(tuple(x.shape), str(x.dtype)) for x in inputs if isinstance(x, torch.Tensor)]


def _diff(old: list, new: list) -> str:
    if len(old) != len(new):
        return f"number of inputs {len(old)} -> {len(new)}"
    changes = [f"input {i} {'shape' if a[1:] == b[1:] else 'signature'} {a[0]} -> {b[0]}"
               for i, (a, b) in enumerate(zip(old, new)) if a != b]
    return "; ".join(changes[:3]) or "guard failure (same input shapes)"


def _note_compile(fn: str, is_recompile: bool, inputs, opts):
    """Count a recompilation (and warn when shapes keep changing); returns the function's previous
    input signature (None at its first compile), from which the compile log words the cause."""
    signature = _shape_signature(inputs)
    previous = _last_signature.get(fn)
    _last_signature[fn] = signature
    if not is_recompile:
        return previous
    reason = _diff(previous, signature) if previous is not None else "guard failure"
    count = metrics.note_recompile(fn, reason)
    shape_change = previous is not None and len(previous) == len(signature) and any(
        a[0] != b[0] for a, b in zip(previous, signature))
    if shape_change and metrics.should_warn_recompiles(fn, opts.recompile_warn_threshold):
        warnings.warn(_RECOMPILE_ADVICE.format(fn=fn, n=count, reason=reason), UserWarning, stacklevel=4)
    return previous


def _preserve(opts, graph_name: str, gm: torch.fx.GraphModule) -> str | None:
    if not opts.preserve_artifacts:
        return None
    rank_dir = f"proc_{options_mod.rank()}"
    fx_dir = os.path.join(opts.debug_dir, "fx_graphs", rank_dir)
    code_dir = os.path.join(opts.debug_dir, "code", rank_dir, f"{opts.model_name}_{graph_name}")
    os.makedirs(fx_dir, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    with open(os.path.join(fx_dir, f"{opts.model_name}_{graph_name}_{stamp}.fx.txt"), "w") as f:
        f.write(gm.print_readable(print_output=False))
    return code_dir


def _inductor_compile(gm, example_inputs, opts, code_dir):
    from torch._inductor import config as inductor_config
    from torch._inductor.compile_fx import compile_fx

    patches = {}
    if code_dir is not None:
        patches = {"trace.enabled": True, "trace.debug_dir": code_dir}
    with inductor_config.patch(patches):
        return compile_fx(gm, example_inputs)


def _numerics_compile(gm, example_inputs):
    """check/trainium numerics: AOTAutograd graphs run op by op (no Inductor code
    generation), so each ATen op goes through the numerics dispatch mode and a
    compiled graph computes what eager computes in the same mode."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def as_is(graph, _inputs):
        return make_boxed_func(graph.forward)

    return aot_autograd(fw_compiler=as_is, bw_compiler=as_is, keep_inference_input_mutations=True)(
        gm, example_inputs)


def _compile_static(gm, example_inputs, opts, fn: str, graph_name: str, info: dict | None = None):
    """Compile one static graph through the caches; returns a callable. `info` receives where the
    program came from ("source") and the backend's wall time ("compile_s"), for the compile log."""
    info = {} if info is None else info
    info.update(source="memory cache", compile_s=0.0)
    override = hooks.compile_overrides.active()   # a dry run's (compiler/hooks.py)
    fields = opts.key_fields() + ((override.key_field,) if override is not None else ())
    if hooks.any_op_by_op():   # numerics check/trainium, strict op check (compiler/hooks.py)
        key = cache.graph_key(gm, example_inputs, fields) if opts.cache else None
        hit = cache.memory_get(key)
        if hit is None:
            hit = _numerics_compile(gm, example_inputs)
            metrics.record(graphs_compiled=1)
            info["source"] = "compiled"
            if opts.cache:
                cache.memory_put(key, hit, opts.memory_cache_entries)
        else:
            metrics.record(cache_hits_memory=1)
        return hit
    key = None
    if opts.cache:
        key = cache.graph_key(gm, example_inputs, fields)
        if override is None:
            info["key"] = key   # the compile log's key is this one (no dry-run field): not hashed twice
        hit = cache.memory_get(key)
        if hit is not None:
            metrics.record(cache_hits_memory=1)
            return hit
    start = time.perf_counter()
    code_dir = _preserve(opts, graph_name, gm)
    try:
        with cache.disk_session(opts) as disk:
            if override is not None:   # e.g. a dry run: Inductor's real program, no-op kernels
                with override.inductor_context():
                    compiled = _inductor_compile(gm, example_inputs, opts, code_dir)
            else:
                compiled = kernel_libraries.compile_repairing(
                    lambda: _inductor_compile(gm, example_inputs, opts, code_dir), disk.inductor_dir,
                    opts.lock_timeout)
            outcome = disk.outcome()
    except Exception as err:  # noqa: BLE001 - reported with the op, or falls back
        metrics.record(compile_time_s=time.perf_counter() - start)
        message = passes.describe_failure(graph_name, gm, err)
        metrics.record(compile_failures=message)
        if not opts.fallback_execution:
            raise NeuronCompileError(message) from err
        warnings.warn(f"{message.split('. Set options')[0]}; running it eagerly (fallback execution)",
                      RuntimeWarning, stacklevel=3)
        metrics.record(fallbacks=1)
        info["source"] = "failed: runs eagerly"
        return gm.forward
    info["compile_s"] = time.perf_counter() - start
    metrics.record(compile_time_s=info["compile_s"], graphs_compiled=1)
    if outcome == "hit":
        metrics.record(cache_hits_disk=1)
    else:
        metrics.record(cache_misses=1)
    if override is not None:
        info["source"] = "dry run"    # Inductor's program with no-op kernels: nothing for the warm index
    else:
        info["source"] = "disk cache" if outcome == "hit" else "compiled"
        info["real_program"] = outcome != "off"
    if opts.cache:
        cache.memory_put(key, compiled, opts.memory_cache_entries)
    return compiled


def _strip_meta(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy of Dynamo's graph without its symbolic example values."""
    graph = torch.fx.Graph()
    value_map: dict = {}
    out = graph.graph_copy(gm.graph, value_map)
    graph.output(out)
    for node in graph.nodes:
        node.meta = {k: v for k, v in node.meta.items() if k in ("stack_trace", "nn_module_stack")}
    new = torch.fx.GraphModule(gm, graph)
    new.meta = {}  # not a Dynamo graph any more: no symbolic sources to guard on
    return new


class _StaticSpecializer:
    """Runs a graph Dynamo traced with symbolic sizes (automatic dynamic shapes,
    dynamic=None) as one static program per concrete input signature."""

    def __init__(self, gm, opts, fn: str, graph_name: str) -> None:
        self.gm = _strip_meta(gm)
        self.opts = opts
        self.fn = fn
        self.graph_name = graph_name
        self.programs: dict[tuple, object] = {}

    def _signature(self, args) -> tuple:
        return tuple((tuple(a.shape), tuple(a.stride()), a.dtype, a.device, a.requires_grad)
                     if isinstance(a, torch.Tensor) else (type(a).__name__, a) for a in args)

    def _fake_inputs(self, args) -> list:
        """Static fake inputs (with a shape env, as Dynamo would make them) and
        fresh example values on every node, so the disk caches accept the graph."""
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.symbolic_shapes import ShapeEnv
        from torch.fx.passes.fake_tensor_prop import FakeTensorProp

        fake_mode = FakeTensorMode(shape_env=ShapeEnv())
        fakes = [fake_mode.from_tensor(a, static_shapes=True) if isinstance(a, torch.Tensor) else a for a in args]
        FakeTensorProp(self.gm, fake_mode).propagate_dont_convert_inputs(*fakes)
        for node in self.gm.graph.nodes:
            if "val" in node.meta:
                node.meta["example_value"] = node.meta["val"]
        return fakes

    def __call__(self, *args):
        sig = self._signature(args)
        program = self.programs.get(sig)
        if program is None:
            previous = _note_compile(self.fn, True, args, self.opts)
            metrics.record(dynamic_specializations=1)
            name = f"{self.graph_name}_s{len(self.programs)}"
            fakes = self._fake_inputs(args)
            cause = ("new shape", compile_log.shape_diff(previous, _shape_signature(args))) \
                if previous is not None else ("first call", "")
            program = _logged_compile(self.gm, fakes, self.opts, self.fn, name, cause, args)
            self.programs[sig] = program
        return program(*args)


def compile_graph(gm: torch.fx.GraphModule, example_inputs, mode: str | None = None,
                  options: dict | None = None):
    registration.register()
    opts = options_mod.resolve(mode, options)
    if not torch._dynamo.config.assume_static_by_default:
        raise NeuronDynamicShapesError(_DYNAMIC_MESSAGE)
    fn, graph_name = _function_name(gm)
    from torch._guards import CompileContext

    compile_id = CompileContext.current_compile_id()
    is_recompile = compile_id is not None and compile_id.frame_compile_id > 0
    if passes.symbolic_inputs(gm, example_inputs):
        # Dynamo's automatic dynamic shapes (dynamic=None): keep neuron static; the
        # specializer counts one recompilation per new shape when it is called.
        return _estimated(gm, _StaticSpecializer(gm, opts, fn, graph_name), graph_name)
    previous = _note_compile(fn, is_recompile, example_inputs, opts)
    cause = compile_log.graph_cause(gm, is_recompile, previous, _shape_signature(example_inputs))
    return _estimated(gm, _logged_compile(gm, example_inputs, opts, fn, graph_name, cause, example_inputs),
                      graph_name)


def _logged_compile(gm, example_inputs, opts, fn: str, graph_name: str, cause: tuple, real_inputs):
    """_compile_static, with its record in the compile log (compiler/_compile_log.py); in
    compile-only mode the callable returned does not execute the program (_compile_only.py)."""
    from ..runtime import env

    info: dict = {}
    compiled = _compile_static(gm, example_inputs, opts, fn, graph_name, info)
    key = info["key"] if "key" in info else cache.graph_key(gm, example_inputs, opts.key_fields())   # no dry-run field
    cache_root = os.path.join(opts.cache_dir, f"torch-{torch.__version__}") if opts.cache else None
    warm = compile_log.is_warm(cache_root, key)
    if info.get("real_program"):
        compile_log.mark_warm(cache_root, key, graph_name)
    compile_log.add(
        graph_name=graph_name, model_name=opts.model_name, function=fn, rank=options_mod.rank(),
        cause=cause[0], detail=cause[1], inputs=compile_log.data_inputs(real_inputs),
        fx_nodes=compile_log.fx_nodes(gm), has_collectives=compile_log.has_collectives(gm),
        training=torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in real_inputs),
        key=key, flags=opts.key_fields(), source=info["source"], warm=warm, compile_s=info["compile_s"],
        flops=compile_log.forward_flops(gm, example_inputs) if compile_log.detail_wanted() else None)
    if env.parse_flag(env.COMPILE_ONLY) and compiled is not gm.forward:
        from ._compile_only import not_executed

        return not_executed(gm, example_inputs, graph_name)
    return compiled


def _estimated(gm, compiled, graph_name: str):
    """The compiled callable behind the registered graph observers (inside torch_neuronx.estimate()
    each call counts as one fused program: estimate/_graphs.py, registered by torch_neuronx/_registration.py)."""
    return hooks.observed(gm, compiled, graph_name)
