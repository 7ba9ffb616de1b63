"""One worker process of the sweep: reads architecture names (one JSON object a line) on stdin and
answers one JSON result a line on the original stdout, prefixed with RESULT_PREFIX. Everything the
libraries print goes to stderr. Before each stage it announces the stage (STAGE_PREFIX) so that the
parent can name the stage of a hang or a crash.
"""
from __future__ import annotations

import copy
import json
import os
import sys
import time
import traceback

RESULT_PREFIX = "@@COMPAT-RESULT@@ "
STAGE_PREFIX = "@@COMPAT-STAGE@@ "
PROMPT_LEN = 8
NEW_TOKENS = 8
MAX_PARAMS = 30_000_000
LOGIT_RTOL = 1e-4     # eager neuron runs the CPU kernels: differences are rounding only
COMPILED_RTOL = 1e-3  # generated code may reorder reductions

_out = None


def _send(prefix: str, payload) -> None:
    os.write(_out, (prefix + (payload if isinstance(payload, str) else json.dumps(payload)) + "\n").encode())


class StageError(Exception):
    def __init__(self, stage: str, exc: BaseException):
        super().__init__(f"{stage}: {type(exc).__name__}: {exc}")
        self.stage, self.exc = stage, exc


_stage_seconds: dict = {}  # per stage of the current architecture: where the sweep's time goes


def _stage(name: str, fn, *args, **kwargs):
    _send(STAGE_PREFIX, name)
    t0 = time.perf_counter()
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - every failure is a result
        raise StageError(name, exc) from exc
    finally:
        _stage_seconds[name] = round(time.perf_counter() - t0, 2)


def _build(model_type: str):
    import torch
    import transformers
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from torch_neuronx.integrations.tiny_models import shrink_config

    config = shrink_config(AutoConfig.for_model(model_type), vocab_size=256)
    for name in ("use_cache",):
        if hasattr(config, name):
            setattr(config, name, True)
    cls = getattr(transformers, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type])
    torch.manual_seed(0)
    model = cls._from_config(config, attn_implementation=None).eval()
    n = sum(p.numel() for p in model.parameters())
    if n > MAX_PARAMS:
        raise ValueError(f"tiny config still has {n / 1e6:.1f}M parameters (limit {MAX_PARAMS / 1e6:.0f}M)")
    return model, config, n


def _inputs(config, device):
    import torch

    vocab = getattr(config, "vocab_size", None) or getattr(getattr(config, "text_config", None), "vocab_size", 256)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, min(vocab, 256), (1, PROMPT_LEN), generator=g)
    return ids.to(device), torch.ones_like(ids).to(device)


def _forward(model, config, device):
    import torch

    ids, mask = _inputs(config, device)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask)
    return out.logits.detach().float().cpu()


def _generate(model, config, device, static: bool):
    import torch

    ids, mask = _inputs(config, device)
    kwargs = dict(do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                  return_dict_in_generate=True, output_logits=True, pad_token_id=0)
    if static:
        kwargs["cache_implementation"] = "static"
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, **kwargs)
    tokens = out.sequences[0, PROMPT_LEN:].cpu().tolist()
    logits = torch.stack([x[0].float().cpu() for x in out.logits]) if out.logits else None
    return tokens, logits


def _max_diff(a, b) -> tuple[float, float]:
    if a is None or b is None or a.shape != b.shape:
        return float("inf"), 1.0
    import torch

    d = (a - b).abs()
    finite = torch.isfinite(a) & torch.isfinite(b)
    same_inf = (a == b) & ~finite
    if not bool((finite | same_inf).all()):
        return float("inf"), 1.0
    return float(d[finite].max()) if finite.any() else 0.0, float(a[finite].abs().max()) if finite.any() else 1.0


def _first_divergence(ref_tokens, tokens, ref_logits):
    """(index, top-2 gap of the reference at that step) for differing token lists."""
    for i, (a, b) in enumerate(zip(ref_tokens, tokens)):
        if a != b:
            gap = None
            if ref_logits is not None and i < len(ref_logits):
                top = ref_logits[i].topk(2).values
                gap = float(top[0] - top[1])
            return i, gap
    return (min(len(ref_tokens), len(tokens)), None) if len(ref_tokens) != len(tokens) else (None, None)


def run_one(model_type: str, compile_static: bool = True) -> dict:
    import torch

    from torch_neuronx import compiler as metrics

    torch._dynamo.reset()
    _stage_seconds.clear()
    r: dict = {"arch": model_type, "cpu": {}, "neuron": {}}
    t0 = time.perf_counter()
    try:
        model, config, n = _stage("build", _build, model_type)
        r["params"] = n
        # --- CPU reference
        ref_logits = _stage("cpu_forward", _forward, model, config, "cpu")
        r["cpu"]["forward"] = "pass"
        ref_tokens, _ = _stage("cpu_generate", _generate, model, config, "cpu", False)
        r["cpu"]["generate"] = "pass"
        r["cpu"]["tokens"] = ref_tokens
        ref_static_tokens = ref_static_logits = None
        if not compile_static:  # --no-compile: neither side runs the static stage, and the report says so
            r["cpu"]["static"] = r["neuron"]["static"] = "skipped"
        else:
            try:
                ref_static_tokens, ref_static_logits = _stage("cpu_static", _generate, model, config, "cpu", True)
                r["cpu"]["static"] = "pass"
            except StageError as e:
                r["cpu"]["static"] = "fail"
                r["cpu"]["static_error"] = f"{type(e.exc).__name__}: {str(e.exc)[:300]}"
        # --- neuron eager
        dev_model = _stage("neuron_move", lambda: copy.deepcopy(model).to("neuron"))
        logits = _stage("neuron_forward", _forward, dev_model, config, "neuron")
        diff, scale = _max_diff(ref_logits, logits)
        r["neuron"]["logit_max_diff"] = diff
        tokens, _ = _stage("neuron_generate", _generate, dev_model, config, "neuron", False)
        r["neuron"]["tokens_equal"] = tokens == ref_tokens
        eager_ok = diff <= LOGIT_RTOL * max(1.0, scale) and tokens == ref_tokens
        r["neuron"]["eager"] = "pass" if eager_ok else "mismatch"
        # --- neuron static cache, decode step compiled with backend "neuron"
        if compile_static and ref_static_tokens is not None:
            metrics.reset_dynamo_metrics()
            try:
                st_tokens, st_logits = _stage("neuron_static", _generate, dev_model, config, "neuron", True)
            except StageError as e:
                r["neuron"]["static"] = "fail"
                r["neuron"]["static_stage"] = e.stage
                r["neuron"]["static_error"] = f"{type(e.exc).__name__}: {str(e.exc)[:400]}"
            else:
                m = metrics.get_dynamo_metrics()
                sdiff, sscale = _max_diff(ref_static_logits, st_logits)
                r["neuron"]["static_logit_max_diff"] = sdiff
                r["neuron"]["static_tokens_equal"] = st_tokens == ref_static_tokens
                r["neuron"]["graphs_compiled"] = m.get("graphs_compiled", 0) + m.get("cache_hits_memory", 0) \
                    + m.get("cache_hits_disk", 0)
                r["neuron"]["graph_breaks"] = m.get("graph_breaks", 0)
                r["neuron"]["fallbacks"] = m.get("fallbacks", 0)
                ok = st_tokens == ref_static_tokens and sdiff <= COMPILED_RTOL * max(1.0, sscale)
                if not ok and st_tokens != ref_static_tokens:
                    idx, gap = _first_divergence(ref_static_tokens, st_tokens, ref_static_logits)
                    r["neuron"]["static_divergence"] = {"step": idx, "reference_top2_gap": gap}
                if ok and r["neuron"]["graphs_compiled"] == 0:
                    r["neuron"]["static"] = "not_compiled"
                else:
                    r["neuron"]["static"] = "pass" if ok else "mismatch"
    except StageError as e:
        r["stage"] = e.stage
        r["error_class"] = type(e.exc).__name__
        r["error"] = str(e.exc)[:500]
        r["traceback_tail"] = "".join(traceback.format_exception(e.exc)[-3:])[-800:]
    r["seconds"] = round(time.perf_counter() - t0, 2)
    r["stage_seconds"] = dict(_stage_seconds)
    return r


def main() -> None:
    global _out
    _out = os.dup(1)
    os.dup2(2, 1)  # library prints go to stderr; results use the saved descriptor
    import torch

    torch.set_num_threads(int(os.environ.get("TORCH_NEURONX_COMPAT_THREADS", "1")))
    import transformers

    transformers.logging.set_verbosity_error()
    try:
        transformers.utils.logging.disable_progress_bar()
    except Exception:
        pass
    import warnings

    warnings.filterwarnings("ignore")
    _send(STAGE_PREFIX, "ready")
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        task = json.loads(line)
        if task["arch"] == os.environ.get("TORCH_NEURONX_COMPAT_TEST_CRASH"):  # tests of the replacement path
            os._exit(3)
        result = run_one(task["arch"], compile_static=task.get("compile", True))
        _send(RESULT_PREFIX, result)


if __name__ == "__main__":
    main()
