"""A mixture-of-experts layer's routed experts as NxD Inference runs them on a NeuronCore.

Static graphs cannot size a matmul by how many tokens the router sends to an expert, so NxD
Inference (NeuronX Distributed's `ExpertMLPsV2.forward`) picks one of three algorithms by shape:

- token generation (one token per sequence): *selective loading* while T x top_k / E is below
  `moe_selective_loading_threshold` (each token's top_k experts' weights are gathered, T x top_k
  expert loads), else *all experts* (every expert of the rank runs every token: its weights load
  once, T x E_local expert MLPs are computed);
- context encoding: selective loading below the same threshold, all experts while T x top_k is
  below one block, else the *blockwise* kernel.

The blockwise kernel assigns each (token, expert) pair to fixed-size blocks of `moe_block_size`
tokens, one expert per block, an expert's last block padded. Shapes being static, it provisions
the worst case, N = ceil((T x top_k - (E_local - 1)) / B) + E_local - 1 blocks (at most T x top_k),
and loops over all N: every block runs its expert's gate, up and down projections on B rows and,
unless `moe_skip_dma_weight`, loads that expert's weights; a block no token was routed to still runs
(unless `moe_skip_padded_blocks`, the dynamic-while kernels' early exit). Token rows are read and
the block's output accumulated (read and written) for all B rows unless `moe_skip_dma_token`.

Time is the roofline of the totals: FLOPs at the TensorEngine's rate x matmul_efficiency, bytes at
HBM bandwidth x hbm_efficiency (blocks of one layer share a shape, so summing each block's
max(compute, memory) gives the same figure when no DMA is skipped). Every constant is a named
assumption (assumptions.py; docs/moe.md gives the sources).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .hardware import Hardware

ALGORITHMS = ("selective", "all_experts", "blockwise")


@dataclass(frozen=True)
class ExpertShape:
    """The routed experts one rank holds. `intermediate` is the rank's share (TP splits it)."""
    hidden: int
    intermediate: int
    local_experts: int       # E / EP
    experts: int             # E, all ranks together (NxD's selective-loading test reads it)
    top_k: int
    dtype_bytes: int = 2
    glu: bool = True         # gate and up projections (SwiGLU), else up only

    def __post_init__(self) -> None:
        for name in ("hidden", "intermediate", "local_experts", "experts", "top_k", "dtype_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"ExpertShape({name}={value!r}): give a positive integer")
        if self.top_k > self.experts:
            raise ValueError(f"ExpertShape(top_k={self.top_k}) exceeds experts={self.experts}")

    @property
    def matrices(self) -> int:
        return 3 if self.glu else 2

    @property
    def weight_bytes(self) -> int:
        """One expert's weights on this rank."""
        return self.matrices * self.hidden * self.intermediate * self.dtype_bytes

    @property
    def flops_per_row(self) -> int:
        """One token through one expert: its projections' multiply-adds."""
        return 2 * self.matrices * self.hidden * self.intermediate


@dataclass(frozen=True)
class MoECost:
    algorithm: str
    tokens: int
    flops: int
    weight_bytes: int
    token_bytes: int
    seconds: float
    compute_s: float
    memory_s: float
    blocks: int = 0              # blockwise: N provisioned (and looped over)
    blocks_with_tokens: int = 0  # blockwise: blocks that hold at least one routed token
    blocks_run: int = 0          # blockwise: blocks executed (N, or the ones with tokens)
    block_size: int = 0
    expert_loads: int = 0        # expert weight loads from HBM

    @property
    def bytes(self) -> int:
        return self.weight_bytes + self.token_bytes

    def as_dict(self) -> dict:
        return dict(asdict(self), bytes=self.bytes)


def algorithm(tokens: int, seq_len: int, shape: ExpertShape, hw: Hardware) -> str:
    """NxD Inference's choice for `tokens` rows (batch x seq_len) of one forward."""
    a = hw.assumptions
    loaded = tokens * shape.top_k / shape.experts
    if seq_len == 1:
        if loaded >= a.moe_selective_loading_threshold or shape.local_experts < shape.experts:
            # NxD has no selective loading under expert parallelism: EP token generation runs all experts
            return "all_experts"
        return "selective"
    if loaded < a.moe_selective_loading_threshold:
        return "selective"
    if tokens * shape.top_k < int(a.moe_block_size):
        return "all_experts"
    return "blockwise"


def block_count(tokens: int, top_k: int, local_experts: int, block_size: int) -> int:
    """N, the blocks the blockwise kernel provisions and loops over: enough for any routing without
    dropping a token (NeuronX Distributed's expert_mlps_v2.forward_blockwise)."""
    pairs = tokens * top_k
    n = math.ceil((pairs - (local_experts - 1)) / block_size) + local_experts - 1
    return max(1, min(n, pairs))


def blocks_with_tokens(loads, block_size: int) -> int:
    """Blocks that hold routed tokens: each expert's load in blocks of `block_size`, the last padded."""
    return sum(math.ceil(n / block_size) for n in loads)


def _check_loads(loads, shape: ExpertShape, tokens: int) -> list[int]:
    loads = [int(n) for n in loads]
    if len(loads) != shape.local_experts:
        raise ValueError(f"loads: {len(loads)} per-expert token counts for {shape.local_experts} local experts")
    if any(n < 0 or n > tokens for n in loads):
        raise ValueError(f"loads: each expert takes 0 to {tokens} tokens (a token picks an expert once), got {loads}")
    if sum(loads) > tokens * shape.top_k:
        raise ValueError(f"loads: {sum(loads)} routed rows exceed tokens x top_k = {tokens * shape.top_k}")
    return loads


def _roofline(flops: int, nbytes: int, hw: Hardware, dtype: str) -> tuple[float, float, float]:
    a = hw.assumptions
    compute = flops / (hw.tensor_flops(dtype) * a.matmul_efficiency)
    memory = nbytes / (hw.hbm_bytes_per_s * a.hbm_efficiency)
    return max(compute, memory), compute, memory


def moe_cost(tokens: int, seq_len: int, loads, shape: ExpertShape, hw: Hardware, *,
             dtype: str = "bfloat16", algo: str | None = None) -> MoECost:
    """The routed experts of one layer on one rank: `tokens` rows enter (batch x seq_len, all of the
    rank's tokens), `loads[e]` of them were routed to local expert e (a routing distribution's,
    plan/models/_routing.py). `algo` forces one of ALGORITHMS (default: NxD Inference's choice)."""
    if not isinstance(tokens, int) or tokens < 1:
        raise ValueError(f"tokens={tokens!r}: give a positive integer")
    loads = _check_loads(loads, shape, tokens)
    algo = algo or algorithm(tokens, seq_len, shape, hw)
    if algo not in ALGORITHMS:
        raise ValueError(f"algo={algo!r}: one of {', '.join(ALGORITHMS)}")
    row = shape.hidden * shape.dtype_bytes
    if algo == "selective":
        # every (token, expert) pair gathers its expert's weights and runs one row through it
        pairs = tokens * shape.top_k
        flops, weights, token_bytes, loads_n = pairs * shape.flops_per_row, pairs * shape.weight_bytes, \
            (tokens + pairs) * row, pairs
        extra = {}
    elif algo == "all_experts":
        # every local expert runs every token; its (E_local, T, H) outputs are masked and summed
        e = shape.local_experts
        flops, weights, token_bytes, loads_n = tokens * e * shape.flops_per_row, e * shape.weight_bytes, \
            (tokens + 2 * e * tokens) * row, e
        extra = {}
    else:
        a = hw.assumptions
        b = int(a.moe_block_size)
        n = block_count(tokens, shape.top_k, shape.local_experts, b)
        used = min(blocks_with_tokens(loads, b), n)
        run = used if a.moe_skip_padded_blocks else n
        flops = run * b * shape.flops_per_row
        if a.moe_skip_dma_weight:   # an expert's consecutive blocks reuse its weights (padded ones the last's)
            loads_n = max(1, sum(1 for x in loads if x))
        else:
            loads_n = run
        weights = loads_n * shape.weight_bytes
        rows = sum(loads) if a.moe_skip_dma_token else run * b
        token_bytes = 3 * rows * row      # each row read, its output accumulated (read and written)
        extra = {"blocks": n, "blocks_with_tokens": used, "blocks_run": run, "block_size": b}
    seconds, compute, memory = _roofline(flops, weights + token_bytes, hw, dtype)
    return MoECost(algo, tokens, int(flops), int(weights), int(token_bytes), seconds, compute, memory,
                   expert_loads=int(loads_n), **extra)
