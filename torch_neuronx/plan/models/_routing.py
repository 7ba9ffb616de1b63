"""Where a dry run's router sends tokens: a stated distribution, never the placeholder zeros.

In a dry run every value computed from phantom weights reads as zero, so a router's top-k of zero
logits picks the same experts for every token (docs/plan.md, "Placeholder values"): one expert
would take every token and expert parallelism could not be planned. `--routing` states the
distribution instead; a plan replaces the indices the router hands its experts module by a
concrete routing with exactly the distribution's per-expert loads (every token still picks top_k
distinct experts):

- `balanced` (default): every expert takes tokens x top_k / experts (a router trained with a
  load-balancing loss, the case the NxD Inference guide plans its blocks for);
- `skewed=S`: the busiest expert takes S times its balanced share (1 <= S <= experts / top_k, a
  token picks an expert once), the others a Zipf-like tail p_e ~ (e + 1)^-a whose exponent gives
  that peak (the NxD Inference guide's "one EP group may receive 3-4x the average");
- a file: a recorded histogram, JSON `[count per expert, ...]` or `{"counts": [...]}` (e.g. the
  sum over a layer's router outputs), scaled to the plan's tokens.

Expert 0 is the busiest, so with expert parallelism the plan's rank (rank 0 runs every rank's
program) holds the busiest experts: its step is the straggler's, the one a step waits for.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

import torch

KINDS = ("balanced", "skewed", "histogram")
FLAG = "--routing"


@dataclass(frozen=True)
class Routing:
    kind: str = "balanced"
    skew: float = 1.0                 # skewed: the busiest expert's load / the balanced load
    counts: tuple[float, ...] = ()    # histogram: recorded counts per expert
    source: str = "balanced"          # how the user stated it (the report names it)

    def shares(self, experts: int, top_k: int) -> list[float]:
        """Each expert's share of the routed (token, expert) pairs; they sum to 1."""
        _check_moe(experts, top_k)
        if self.kind == "balanced":
            return [1.0 / experts] * experts
        if self.kind == "skewed":
            if self.skew > experts / top_k + 1e-9:
                raise ValueError(f"{FLAG} skewed={self.skew:g}: with {experts} experts and top_k {top_k} an expert "
                                 f"takes at most every token, {experts / top_k:g} x its balanced load; "
                                 f"use S in [1, {experts / top_k:g}]")
            return _zipf_with_peak(experts, self.skew)
        if len(self.counts) != experts:
            raise ValueError(f"{FLAG} {self.source}: the histogram has {len(self.counts)} counts but the model "
                             f"has {experts} experts; record one count per expert")
        total = sum(self.counts)
        shares = [c / total for c in self.counts]
        if max(shares) > 1.0 / top_k + 1e-9:
            raise ValueError(f"{FLAG} {self.source}: one expert holds {max(shares):.1%} of the routed pairs, more "
                             f"than 1 / top_k = {1 / top_k:.1%} (a token picks an expert once); is top_k {top_k}?")
        return shares

    def loads(self, tokens: int, experts: int, top_k: int) -> list[int]:
        """Tokens routed to each expert when `tokens` tokens each pick `top_k` experts: the shares of
        tokens x top_k in whole tokens (largest remainders), none above `tokens`."""
        pairs = tokens * top_k
        exact = [s * pairs for s in self.shares(experts, top_k)]
        out = [min(tokens, math.floor(x)) for x in exact]
        order = sorted(range(experts), key=lambda e: (-(exact[e] - math.floor(exact[e])), e))
        left = pairs - sum(out)
        while left > 0:   # the remainders first, then whoever still has room
            for e in order + sorted(range(experts), key=lambda e: out[e]):
                if left and out[e] < tokens:
                    out[e] += 1
                    left -= 1
        return out

    def indices(self, tokens: int, experts: int, top_k: int) -> torch.Tensor:
        """A [tokens, top_k] routing with exactly `loads`: the pairs sorted by expert, pair j to token
        j mod tokens (an expert's run is at most `tokens` long, so a token's top_k experts differ)."""
        loads = self.loads(tokens, experts, top_k)
        flat = torch.repeat_interleave(torch.arange(experts), torch.tensor(loads))
        return flat.view(top_k, tokens).t().contiguous()

    def describe(self, experts: int, top_k: int) -> dict:
        shares = self.shares(experts, top_k)
        return {"routing": self.source, "busiest_expert_load_vs_balanced": max(shares) * experts,
                "expert_shares": shares}


def _check_moe(experts: int, top_k: int) -> None:
    if not (isinstance(experts, int) and isinstance(top_k, int) and 1 <= top_k <= experts):
        raise ValueError(f"routing: experts={experts!r}, top_k={top_k!r}: need 1 <= top_k <= experts")


def _zipf_with_peak(experts: int, peak: float) -> list[float]:
    """p_e ~ (e + 1)^-a, a >= 0 chosen (bisection) so that experts x p_0 = peak."""
    def shares(a: float) -> list[float]:
        w = [(e + 1) ** -a for e in range(experts)]
        total = sum(w)
        return [x / total for x in w]

    if peak <= 1.0 + 1e-12:
        return [1.0 / experts] * experts
    lo, hi = 0.0, 1.0
    while shares(hi)[0] * experts < peak and hi < 1e3:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if shares(mid)[0] * experts < peak else (lo, mid)
    return shares(hi)


def parse(spec: str | None) -> Routing:
    """`--routing`: None or "balanced", "skewed=S", or a histogram file's path."""
    if spec is None or spec == "balanced":
        return Routing()
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"{FLAG} {spec!r}: use balanced, skewed=S or the path of a JSON histogram")
    if spec.startswith("skewed"):
        _, sep, value = spec.partition("=")
        try:
            skew = float(value)
        except ValueError:
            skew = float("nan")
        if not sep or not (skew >= 1.0) or math.isinf(skew):
            raise ValueError(f"{FLAG} {spec!r}: skewed=S takes S >= 1, the busiest expert's load over the "
                             f"balanced load (e.g. skewed=3)")
        return Routing("skewed", skew=skew, source=spec)
    try:
        with open(spec) as f:
            data = json.load(f)
    except OSError as err:
        raise ValueError(f"{FLAG} {spec!r}: not balanced, skewed=S nor a readable histogram file "
                         f"({err.strerror})") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{FLAG} {spec!r}: the histogram file is not JSON ({err.msg})") from None
    counts = data.get("counts") if isinstance(data, dict) else data
    if not isinstance(counts, list) or not counts or any(
            isinstance(c, bool) or not isinstance(c, (int, float)) or c < 0 or math.isinf(c) for c in counts) \
            or not sum(counts) > 0:
        raise ValueError(f"{FLAG} {spec!r}: give a JSON list of token counts per expert (numbers >= 0, not all "
                         f"0), or {{\"counts\": [...]}}")
    return Routing("histogram", counts=tuple(float(c) for c in counts), source=spec)


# ---- the dry run's experts see the stated routing ------------------------------------------------

def experts_modules(model) -> list:
    """The routed-experts modules of a Hugging Face MoE model: transformers' experts interface
    (`forward(hidden_states, top_k_index, top_k_weights)`, 3-D gate_up_proj / down_proj)."""
    out = []
    for m in model.modules():
        gate_up, down = getattr(m, "gate_up_proj", None), getattr(m, "down_proj", None)
        if isinstance(down, torch.Tensor) and down.dim() == 3 and hasattr(m, "num_experts") and (
                gate_up is None or (isinstance(gate_up, torch.Tensor) and gate_up.dim() == 3)):
            out.append(m)
    return out


def install(model, routing: Routing) -> list:
    """Route every experts module of `model` by `routing`: a forward pre-hook (run before expert
    parallelism's dispatch, which replaces the module's forward) hands it `routing.indices` in place
    of the router's. Returns the hook handles (remove them to restore the router's choices)."""
    handles = []
    shape = moe_config(model.config)
    for m in experts_modules(model):
        # all experts of the layer: under expert parallelism the module's own count is its rank's
        experts = shape[0] if shape else m.num_experts

        def pre(module, args, kwargs, experts=experts):
            hidden, top_k_index = args[0], args[1]
            tokens, top_k = top_k_index.shape[0], top_k_index.shape[-1]
            index = routing.indices(tokens, experts, top_k).to(device=top_k_index.device, dtype=top_k_index.dtype)
            return (hidden, index, *args[2:]), kwargs

        handles.append(m.register_forward_pre_hook(pre, with_kwargs=True, prepend=True))
    return handles


def as_routing(routing) -> Routing:
    """A Routing from a Routing, its --routing text or None (balanced)."""
    return routing if isinstance(routing, Routing) else parse(routing)


def moe_config(config) -> tuple[int, int] | None:
    """(experts, top_k) of a MoE config, or None."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    experts = next((getattr(text, n) for n in ("num_experts", "num_local_experts", "n_routed_experts")
                    if isinstance(getattr(text, n, None), int)), None)
    top_k = next((getattr(text, n) for n in ("num_experts_per_tok", "moe_topk", "top_k")
                  if isinstance(getattr(text, n, None), int)), None)
    return (experts, top_k) if experts and top_k else None


def report_section(config, routing: Routing, tokens: int, layout) -> dict | None:
    """The train report's `moe`: the routing and, per micro-step, the loads of the `tokens` tokens a
    rank routes; with expert parallelism, the rows the plan's rank (the busiest experts) receives
    from its EP group, every peer routing as it does."""
    shape = moe_config(config)
    if shape is None:
        return None
    experts, top_k = shape
    loads = routing.loads(tokens, experts, top_k)
    ep = max(1, getattr(layout, "ep", 1))
    local = experts // ep
    out = {**routing.describe(experts, top_k), "tokens_per_rank": tokens, "expert_loads": loads,
           "ep": ep, "experts_per_rank": local,
           "rows_received_by_busiest_rank": ep * sum(loads[:local]) if ep > 1 else sum(loads)}
    out["expert_shares"] = [round(x, 6) for x in out["expert_shares"]]
    return out
