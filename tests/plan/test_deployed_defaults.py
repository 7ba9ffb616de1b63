"""What a deployed plan compiles when the user gives only the model, TP, batch and lengths: NxD
Inference's automatic buckets ending at the max length (no cache rounded up to a power of two), and
a context encoding that attends within the prompt's bucket. Dry runs of a small Llama config on
trn2.3xlarge at LNC 1, in one process (tests/plan/moe_plans.py)."""
from __future__ import annotations


import pytest

from tests.plan.moe_plans import plan_in_child
from tests.plan.test_layout_scaling import DENSE, _save
from torch_neuronx.plan.models._deployed import default_buckets


def test_default_buckets_are_nxd_inferences():
    """generate_buckets(128, max length): 2^7 .. 2^(round(log2 max) - 1), then the max length."""
    assert default_buckets(11500) == [128, 256, 512, 1024, 2048, 4096, 11500]   # log2 = 13.49 -> 13
    assert default_buckets(1750) == [128, 256, 512, 1024, 1750]                  # log2 = 10.77 -> 11
    assert default_buckets(3000) == [128, 256, 512, 1024, 2048, 3000]            # log2 = 11.55 -> 12
    assert default_buckets(16384) == [128, 256, 512, 1024, 2048, 4096, 8192, 16384]
    assert default_buckets(129) == [129] and default_buckets(36) == [36]


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("defaults")
    dense = _save(tmp, "dense", DENSE)
    inst = dict(instance="trn2.3xlarge", lnc=1)
    specs = [{"command": "deployed", "config": dense, "layout": dict(inst, tp=2),
              "args": dict(batch=1, input_tokens=600, output_tokens=4)}]
    # the same 1,024-token bucket over a short and a long cache
    specs += [{"command": "deployed", "config": dense, "layout": dict(inst, tp=2),
               "args": dict(batch=1, input_tokens=600, output_tokens=4, buckets=[1024], max_model_len=n)}
              for n in (1024, 4096)]
    r = plan_in_child(specs, tmp)
    return {"default": r[0], "short": r[1], "long": r[2]}


def test_the_cache_and_the_last_bucket_end_at_the_max_length(plans):
    r = plans["default"]
    assert r["max_model_len"] == 604 and r["buckets"] == [128, 256, 604]   # log2(604) = 9.24 -> 2^7, 2^8
    assert r["graphs"]["context_encoding"]["bucket_tokens"] == 604
    assert r["graphs"]["token_generation"]["kv_cache_tokens"] == 604
    assert "buckets" in r["assumptions_serving"]
    assert "buckets" not in plans["short"]["assumptions_serving"]   # the user's own buckets


def test_the_context_encoding_attends_within_its_bucket(plans):
    """A 4x longer cache leaves the CTE's FLOPs as they are (its attention spans the 1,024-token bucket)
    while each decode step attends over every cache position: its attention FLOPs, 2 x 2 x positions x
    hidden / TP per layer, grow by the extra 3,072 positions."""
    short, long = plans["short"], plans["long"]
    cte = [r["graphs"]["context_encoding"]["flops"] for r in (short, long)]
    assert cte[0] == cte[1]
    tkg = [r["graphs"]["token_generation"]["flops"] for r in (short, long)]
    extra = DENSE["num_hidden_layers"] * 4 * (4096 - 1024) * DENSE["hidden_size"] // 2
    assert tkg[1] - tkg[0] == extra
