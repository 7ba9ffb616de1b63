"""Run one tiny pipeline on CPU, on neuron eagerly, and on neuron with its denoiser compiled; compare."""
from __future__ import annotations

import inspect
import os
import time
import traceback
import warnings

import torch

from .specs import Spec

STEPS = 2
EAGER_ATOL = 1e-5      # diffusers downcasts fp64 rope/grids to fp32 on "neuron" (utils/torch_utils.py
                       # _FP64_UNSUPPORTED_DEVICES), so rope models differ from CPU's fp64 path by ~1e-7
COMPILED_ATOL = 1e-3   # images in [0, 1]; compiled kernels fuse and reorder float math


def _move(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    return value


def _run(pipe, spec: Spec, device):
    kwargs = {k: _move(v, device) for k, v in spec.call().items()}
    kwargs.setdefault("num_inference_steps", STEPS)
    params = inspect.signature(pipe.__call__).parameters
    if "height" in params:
        kwargs.setdefault("height", 32)
        kwargs.setdefault("width", 32)
    out = pipe(generator=torch.Generator("cpu").manual_seed(0), output_type="pt", **kwargs)
    images = out.images if hasattr(out, "images") else out[0]
    return images.float().cpu()


def load_pipeline(spec: Spec, workdir: str):
    import diffusers

    cls = getattr(diffusers, spec.pipeline)
    comps = spec.build()
    accepted = set(inspect.signature(cls.__init__).parameters)
    comps = {k: v for k, v in comps.items() if k in accepted}
    pipe = cls(**comps)
    path = os.path.join(workdir, spec.name)
    pipe.save_pretrained(path, safe_serialization=True)
    missing = {k: None for k, v in comps.items() if v is None}
    missing.update(spec.load_extra())
    return cls.from_pretrained(path, **missing)


def denoiser(pipe):
    return getattr(pipe, "transformer", None) or getattr(pipe, "unet")


def run_spec(spec: Spec, workdir: str, compile: bool = True) -> dict:
    from ...compiler import get_dynamo_metrics, reset_dynamo_metrics

    rec = {"name": spec.name, "pipeline": spec.pipeline, "kind": spec.kind, "tp_plan": spec.tp_plan,
           "status": "pass", "stage": None, "error": None}
    stage = "load"
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            stage = "load"
            pipe = load_pipeline(spec, workdir)
            stage = "cpu-eager"
            ref = _run(pipe, spec, "cpu")
            rec["shape"] = list(ref.shape)
            stage = "neuron-eager"
            pipe.to("neuron")
            out = _run(pipe, spec, "neuron")
            rec["eager_max_diff"] = (out - ref).abs().max().item()
            rec["eager_bitwise"] = bool(torch.equal(out, ref))
            if rec["eager_max_diff"] > EAGER_ATOL:
                raise AssertionError(f"neuron eager differs from CPU by {rec['eager_max_diff']:.3g} (> {EAGER_ATOL})")
            if compile:
                stage = "neuron-compile"
                torch._dynamo.reset()
                reset_dynamo_metrics()
                model = denoiser(pipe)
                if getattr(model, "_repeated_blocks", None):
                    model.compile_repeated_blocks(backend="neuron", fullgraph=True, dynamic=False)
                    rec["compiled"] = "compile_repeated_blocks"
                    rec["blocks"] = sum(type(m).__name__ in model._repeated_blocks for m in model.modules())
                else:
                    model.compile(backend="neuron", dynamic=False)
                    rec["compiled"] = "torch.compile(denoiser)"
                    rec["blocks"] = 1
                t1 = time.perf_counter()
                out = _run(pipe, spec, "neuron")
                rec["compile_first_call_s"] = round(time.perf_counter() - t1, 2)
                m1 = get_dynamo_metrics()
                t1 = time.perf_counter()
                out2 = _run(pipe, spec, "neuron")
                rec["compile_second_call_s"] = round(time.perf_counter() - t1, 2)
                m2 = get_dynamo_metrics()
                rec["graphs_compiled"] = m1["graphs_compiled"]
                rec["recompilations"] = m1["recompilations"]
                rec["cache_hits"] = m1.get("cache_hits_memory", 0) + m1.get("cache_hits_disk", 0)
                rec["recompile_reasons"] = list(m1.get("recompile_reasons", []))[:4]
                rec["graphs_compiled_second_call"] = m2["graphs_compiled"] - m1["graphs_compiled"]
                rec["graph_breaks"] = m2.get("graph_breaks", 0)
                rec["compiled_max_diff"] = (out - ref).abs().max().item()
                if rec["compiled_max_diff"] > COMPILED_ATOL:
                    raise AssertionError(f"compiled output differs from CPU by {rec['compiled_max_diff']:.3g} "
                                         f"(> {COMPILED_ATOL})")
                if not torch.equal(out, out2):
                    raise AssertionError("second compiled call differs from the first")
                if rec["graphs_compiled_second_call"]:
                    raise AssertionError(f"second call compiled {rec['graphs_compiled_second_call']} more graph(s)")
    except Exception as exc:  # noqa: BLE001 - every failure is a report row
        rec["status"] = "fail"
        rec["stage"] = stage
        msg = f"{type(exc).__name__}: {exc}".strip().splitlines()
        rec["error"] = (msg[0] if msg else type(exc).__name__)[:300]
        rec["traceback_tail"] = traceback.format_exc().strip().splitlines()[-3:]
    rec["wall_s"] = round(time.perf_counter() - t0, 2)
    return rec
