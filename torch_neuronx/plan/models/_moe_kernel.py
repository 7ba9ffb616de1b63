"""A deployed plan's routed experts run as one NxD Inference MoE kernel call, costed as Neuron runs it.

Hugging Face's experts code (a loop over experts, or grouped matmuls sized by the routing) is not
what a Trainium deployment runs: NxD Inference picks selective loading, all experts or its
blockwise kernel by shape, and the blockwise kernel loops over a worst-case block count, each
block loading its expert's weights (estimate/moe.py). In a deployed plan the experts modules run
through transformers' experts interface under the implementation name IMPLEMENTATION, so whatever
tensor or expert parallelism wraps their forward stays: each call is one call of the op
`torch_neuronx_plan::routed_experts` (the same function: the experts' SwiGLU MLPs on the router's
choices, weighted and summed per token), which the compiled graph keeps as one kernel. Its
registered cost is estimate/moe.py's for the shape of the call and the per-expert loads of the
plan's routing distribution (_routing.py), never the phantom indices.
"""
from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from ...estimate import Cost, register_cost
from ...estimate import hardware as _hardware
from ...estimate.moe import ExpertShape, moe_cost
from ._routing import Routing, experts_modules

_OP = "torch_neuronx_plan::routed_experts"
_active: list[Routing] = [Routing()]   # the routing the cost of a call reads (innermost plan's)


@torch.library.custom_op(_OP, mutates_args=())
def routed_experts(hidden: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor,
                   gate_up: torch.Tensor, down: torch.Tensor, seq_len: int, experts: int) -> torch.Tensor:
    """Sum over each token's top_k experts e (local ones: index < gate_up.shape[0]) of
    weight x down_e(silu(gate_e x) * up_e x); gate_up [E_local, 2I, H], down [E_local, H, I]."""
    out = torch.zeros(hidden.shape, dtype=torch.float32, device=hidden.device)
    for e in range(gate_up.shape[0]):
        hit = top_k_index == e                                   # [T, top_k]
        weight = (top_k_weights * hit).sum(-1, keepdim=True)     # 0 for tokens that did not pick e
        gate, up = F.linear(hidden, gate_up[e]).chunk(2, dim=-1)
        out += weight.float() * F.linear(F.silu(gate) * up, down[e]).float()
    return out.to(hidden.dtype)


@routed_experts.register_fake
def _(hidden, top_k_index, top_k_weights, gate_up, down, seq_len, experts):
    return torch.empty_like(hidden)


def shape_of(hidden, top_k_index, gate_up, down, experts: int) -> ExpertShape:
    return ExpertShape(hidden=int(hidden.shape[-1]), intermediate=int(down.shape[-1]),
                       local_experts=int(gate_up.shape[0]), experts=int(experts),
                       top_k=int(top_k_index.shape[-1]), dtype_bytes=gate_up.element_size())


def local_loads(routing: Routing, tokens: int, shape: ExpertShape) -> list[int]:
    """This rank's experts' loads: the first E_local experts (rank 0's under expert parallelism,
    the busiest: _routing.py)."""
    return routing.loads(tokens, shape.experts, shape.top_k)[:shape.local_experts]


def cost_of_call(hidden, top_k_index, gate_up, down, seq_len: int, experts: int, hw=None):
    """estimate/moe.py's MoECost of one call under the active routing."""
    shape = shape_of(hidden, top_k_index, gate_up, down, experts)
    tokens = int(hidden.shape[0])
    return moe_cost(tokens, int(seq_len), local_loads(_active[-1], tokens, shape), shape,
                    hw if hw is not None else _hardware())


@register_cost(torch.ops.torch_neuronx_plan.routed_experts)
def _cost(hidden, top_k_index, top_k_weights, gate_up, down, seq_len, experts, *, out_val=None):
    c = cost_of_call(hidden, top_k_index, gate_up, down, seq_len, experts)
    return Cost(flops=c.flops, bytes=c.bytes, category="matmul")


def _local(t: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor

    return t.to_local() if isinstance(t, DTensor) else t


IMPLEMENTATION = "neuron_plan_kernel"   # the name the deployed plan registers in transformers' ExpertsInterface


def _kernel_forward(module, hidden_states, top_k_index, top_k_weights):
    """transformers' experts interface (`forward(hidden_states, top_k_index, top_k_weights)`): what
    the module runs inside whatever tensor / expert parallelism wraps around its forward."""
    return routed_experts(_local(hidden_states), _local(top_k_index), _local(top_k_weights),
                          _local(module.gate_up_proj), _local(module.down_proj), module._neuron_plan_seq_len(),
                          module.num_experts)


def _register() -> None:
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

    if IMPLEMENTATION not in ALL_EXPERTS_FUNCTIONS:
        ALL_EXPERTS_FUNCTIONS.register(IMPLEMENTATION, _kernel_forward)


def _is_silu(act) -> bool:
    """torch's SiLU or transformers' SiLUActivation (ACT2FN["silu"]), checked on a few values."""
    if not callable(act):
        return False
    probe = torch.linspace(-4, 4, 9)
    try:
        return bool(torch.allclose(act(probe), F.silu(probe)))
    except Exception:  # noqa: BLE001 - an activation that cannot run on a CPU tensor is not SiLU
        return False


def supported(module) -> bool:
    """SwiGLU experts in transformers' layout without biases: what the kernel op computes."""
    gate_up, down = getattr(module, "gate_up_proj", None), getattr(module, "down_proj", None)
    return (isinstance(gate_up, torch.Tensor) and gate_up.dim() == 3 and isinstance(down, torch.Tensor)
            and not getattr(module, "has_bias", False) and not getattr(module, "is_transposed", False)
            and _is_silu(getattr(module, "act_fn", None))
            and gate_up.shape[-1] == down.shape[1] and gate_up.shape[1] == 2 * down.shape[-1])


def shard_experts(model, ep: int) -> int:
    """Lay `model`'s experts out as vLLM-Neuron's expert parallelism does within the TP group (its
    `ep_degree`; docs/moe.md): EP groups of TP / EP ranks, each group holding E / EP whole experts whose
    intermediate size its TP / EP ranks split. The plan's rank (rank 0) holds experts [0, E / EP), the
    busiest under the routing (_routing.py): gate_up [E / EP, 2 x I x EP / TP, H] and down
    [E / EP, H, I x EP / TP] in place of TP's [E, 2 x I / TP, H] and [E, H, I / TP]. The tensors are
    allocated empty (a plan reads shapes, and its weights are random): the kernel op then computes
    and is costed for the rank's local experts, and the TP style's all-reduce after the experts, the
    combine vLLM-Neuron runs, stays. Returns how many experts modules were laid out."""
    if ep == 1:
        return 0
    modules = experts_modules(model)
    odd = [m for m in modules if not supported(m)]
    if odd or not modules:
        kind = type(odd[0]).__name__ if odd else "none found"
        raise ValueError(f"--ep {ep}: the model's experts module ({kind}) is not transformers' experts interface "
                         f"(3-D gate_up_proj / down_proj, SwiGLU, no bias) that the deployed plan's MoE kernels take; "
                         f"plan it with --ep 1")
    for m in modules:
        gate_up, down = _local(m.gate_up_proj), _local(m.down_proj)
        experts, dtype, device = int(gate_up.shape[0]), gate_up.dtype, gate_up.device
        if experts % ep:
            raise ValueError(f"--ep {ep} does not divide the {experts} experts of {type(m).__name__}")
        shapes = {"gate_up_proj": (experts // ep, int(gate_up.shape[1]) * ep, int(gate_up.shape[2])),
                  "down_proj": (experts // ep, int(down.shape[1]), int(down.shape[2]) * ep)}
        del gate_up, down
        for name, shape in shapes.items():
            del m._parameters[name]   # TP's shard freed first: the rank never holds both
            m.register_parameter(name, torch.nn.Parameter(torch.empty(shape, dtype=dtype, device=device),
                                                          requires_grad=False))
    return len(modules)


@contextlib.contextmanager
def deployed(model, routing: Routing, seq_len_of):
    """Run `model`'s supported experts modules as the kernel op while inside, their cost read from
    `routing`; `seq_len_of()` gives the current step's tokens per sequence (1: token generation).
    Yields {"modules": how many were replaced, "shape": the first one's ExpertShape (this rank's)}."""
    swapped = [m for m in experts_modules(model) if supported(m) and hasattr(getattr(m, "config", None),
                                                                              "_experts_implementation")]
    info = {"modules": len(swapped), "shape": None,   # weight_bytes: the swapped experts' weights on this rank
            "weight_bytes": sum(_local(t).numel() * _local(t).element_size()
                                for m in swapped for t in (m.gate_up_proj, m.down_proj))}
    if swapped:
        m = swapped[0]
        gate_up, down = _local(m.gate_up_proj), _local(m.down_proj)
        info["shape"] = ExpertShape(hidden=int(down.shape[1]), intermediate=int(down.shape[-1]),
                                    local_experts=int(gate_up.shape[0]), experts=int(m.num_experts),
                                    top_k=1, dtype_bytes=gate_up.element_size())
        _register()
    configs = {id(m.config): m.config for m in swapped}
    saved = {k: c._experts_implementation for k, c in configs.items()}
    for m in swapped:
        m._neuron_plan_seq_len = seq_len_of
    for c in configs.values():
        c._experts_implementation = IMPLEMENTATION
    _active.append(routing)
    try:
        yield info
    finally:
        _active.pop()
        for k, c in configs.items():
            c._experts_implementation = saved[k]
        for m in swapped:
            del m._neuron_plan_seq_len


def _top_k(config) -> int | None:
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    for name in ("num_experts_per_tok", "moe_topk", "top_k"):
        value = getattr(text, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def report_section(info, config, routing: Routing, cte: tuple[int, int], tkg: tuple[int, int], graphs: dict,
                   layout) -> dict | None:
    """The deployed report's `moe`: the routing, this rank's expert shape, and per step (CTE: `cte` =
    (tokens, tokens per sequence), TKG likewise) NxD Inference's algorithm with its blocks, FLOPs and
    weight traffic per MoE layer and for all of them (`info["modules"]`, the layers at full depth)."""
    if not info or not info.get("modules") or info.get("shape") is None or _top_k(config) is None:
        return None
    from dataclasses import asdict, replace

    shape = replace(info["shape"], top_k=_top_k(config))
    hw = _hardware(layout.instance, layout.lnc)
    layers = int(info["modules"])
    ep = getattr(layout, "ep", 1)
    out = {"layers": layers, "expert_shape_per_rank": asdict(shape),
           # how the experts are split: EP groups of TP / EP ranks (vLLM-Neuron's ep_degree; 1: TP only)
           "ep": ep, "tp_per_expert": layout.tp // ep, "experts_per_rank": shape.local_experts,
           "intermediate_per_rank": shape.intermediate, "intermediate": shape.intermediate * layout.tp // ep,
           "expert_weight_bytes_per_core": info.get("weight_bytes"),
           **routing.describe(shape.experts, shape.top_k)}
    for name, (tokens, seq_len), graph in (("context_encoding", cte, "context_encoding"),
                                           ("token_generation", tkg, "token_generation")):
        c = moe_cost(tokens, seq_len, local_loads(routing, tokens, shape), shape, hw)
        step = graphs.get(graph, {}).get("seconds")
        out[name] = {**c.as_dict(), "seconds_all_layers": c.seconds * layers,
                     "share_of_step": c.seconds * layers / step if step else None}
    out["expert_shares"] = [round(x, 6) for x in out["expert_shares"]]
    return out
