"""The c10d shape contract of the single-tensor gathers and scatters, on gloo's stricter transport.

`all_gather_into_tensor(output, input)` and `reduce_scatter_tensor(output, input)` as NCCL implements
them (ProcessGroupNCCL::_allgather_base / _reduce_scatter_base) only ask that both tensors be contiguous,
of one dtype, and that the big one hold `world_size x` the small one's elements, in any shape: accelerate's
`gather()` and `pad_across_processes` gather an input of shape (1, 2) into a flat (4,) output. gloo also
wants the shapes to line up (output (world*n, ...) for input (n, ...)) and rejects the rest with
"ProcessGroupGloo::allgather: invalid tensor size". Flat views of both tensors satisfy both rules and
share their bytes, so the result lands in the caller's tensors with no copy.
"""
from __future__ import annotations

import torch


def _flat(t: torch.Tensor, role: str, collective: str) -> torch.Tensor:
    if not t.is_contiguous():
        raise ValueError(f"{collective}: the {role} tensor must be contiguous (as for NCCL); got shape "
                         f"{tuple(t.shape)} with strides {t.stride()}. Pass `{role}.contiguous()` (for the "
                         f"output, copy the result back afterwards).")
    return t.view(-1)


def _check_sizes(small: torch.Tensor, big: torch.Tensor, world: int, small_role: str, big_role: str,
                 collective: str) -> None:
    if big.numel() != world * small.numel():
        raise ValueError(f"{collective}: the {big_role} tensor must have world_size x {small_role}.numel() = "
                         f"{world} x {small.numel()} = {world * small.numel()} elements; got shape "
                         f"{tuple(big.shape)} ({big.numel()} elements) for {small_role} shape {tuple(small.shape)}.")


def gather_pair(output: torch.Tensor, input: torch.Tensor, world: int,
                collective: str = "all_gather_into_tensor") -> tuple[torch.Tensor, torch.Tensor]:
    """Flat (output, input) views for gloo's `_allgather_base`, after NCCL's checks."""
    _check_sizes(input, output, world, "input", "output", collective)
    return _flat(output, "output", collective), _flat(input, "input", collective)


def scatter_pair(output: torch.Tensor, input: torch.Tensor, world: int,
                 collective: str = "reduce_scatter_tensor") -> tuple[torch.Tensor, torch.Tensor]:
    """Flat (output, input) views for gloo's `_reduce_scatter_base`, after NCCL's checks."""
    _check_sizes(output, input, world, "output", "input", collective)
    return _flat(output, "output", collective), _flat(input, "input", collective)
