"""Grouped-query attention in a compiled graph: the repeated KV heads (`repeat_kv`'s broadcast copy)
are not materialised when only matmuls read them; the matmuls read the stored heads, once per group
(`matmul_broadcast_reuse=1`) or once per query head (0). Checked against the same attention given
the repeated heads as inputs (multi-head attention of as many KV heads as query heads), whose
matmuls read every repeated head from HBM."""
import pytest
import torch
from transformers.integrations.sdpa_attention import repeat_kv

from torch_neuronx.estimate import hardware
from torch_neuronx.estimate._graphs import estimate_graph
from torch_neuronx.runtime.env import NeuronEnvironmentError

B, KV, GROUP, S, D = 2, 2, 4, 1024, 64


class Attention(torch.nn.Module):
    """transformers' eager attention of one decode token over S cached positions."""

    def __init__(self, repeat: int):
        super().__init__()
        self.repeat = repeat

    def forward(self, q, k, v):
        k, v = repeat_kv(k, self.repeat), repeat_kv(v, self.repeat)
        scores = torch.matmul(q, k.transpose(2, 3)) / 8.0
        return torch.matmul(scores.softmax(-1), v)


class KeysAlsoAdded(Attention):
    """The repeated keys are also read by an elementwise op: their copy must exist in HBM."""

    def forward(self, q, k, v):
        k, v = repeat_kv(k, self.repeat), repeat_kv(v, self.repeat)
        scores = torch.matmul(q, k.transpose(2, 3)) / 8.0
        return torch.matmul(scores.softmax(-1), v), k + 1


def _bytes(module, kv_heads, reuse=None):
    q = torch.randn(B, KV * GROUP, 1, D, device="neuron", dtype=torch.bfloat16)
    k = torch.randn(B, kv_heads, S, D, device="neuron", dtype=torch.bfloat16)
    hw = hardware("trn2.3xlarge", assumptions=None if reuse is None else {"matmul_broadcast_reuse": reuse})
    gm = torch.fx.symbolic_trace(module)
    return estimate_graph(gm, [q, k, k.clone()], hw, "attention", backward=False)["forward"].bytes


def test_repeated_kv_heads_are_read_as_stored():
    stored = 2 * B * KV * S * D * 2                # K and V, bf16
    repeated = stored * GROUP
    mha = _bytes(Attention(1), KV * GROUP)          # every repeated head an input the matmuls read
    assert _bytes(Attention(GROUP), KV, reuse=0) == mha
    assert _bytes(Attention(GROUP), KV, reuse=1) == mha - (repeated - stored)
    assert _bytes(Attention(GROUP), KV) == _bytes(Attention(GROUP), KV, reuse=1)    # the default
    assert _bytes(Attention(GROUP), KV, reuse=0.5) == mha - (repeated - stored) // 2


def test_a_copy_an_elementwise_op_reads_stays_in_hbm():
    """The keys' copy is written (an elementwise op reads it), so its reuse does not matter; the
    values' copy, read only by a matmul, is still elided."""
    kept = _bytes(KeysAlsoAdded(GROUP), KV, reuse=1)
    per_head = _bytes(KeysAlsoAdded(GROUP), KV, reuse=0)
    value_copy = B * KV * S * D * 2
    assert per_head - kept == value_copy * (GROUP - 1)


@pytest.mark.parametrize("value", ["1.5", "-1"])
def test_reuse_outside_zero_to_one_names_the_assumption(value):
    with pytest.raises(NeuronEnvironmentError, match="matmul_broadcast_reuse"):
        hardware("trn2.3xlarge", assumptions={"matmul_broadcast_reuse": value})
