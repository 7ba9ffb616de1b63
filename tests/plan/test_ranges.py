"""Calibrated ranges (plan/_ranges.py) on tables whose residuals are known: the order-statistic
interval, the few-rows rule, the leave-one-out coverage, and a plan's figures moved by the range."""
import math

import pytest

from torch_neuronx.plan import _ranges as R
from torch_neuronx.plan import _report_ranges as RR

DENSE_PREFILL = R.Kind("dense", "prefill", "nxd-inference")
DENSE_DECODE = R.Kind("dense", "decode", "nxd-inference")
MOE_PREFILL = R.Kind("moe", "prefill", "nxd-inference")


def _table(kind, residuals, prefix):
    return {f"{prefix}{i}": (kind, r) for i, r in enumerate(residuals)}


def test_order_interval_is_the_conformal_pair():
    # 19 rows: j = floor(0.1 x 20) = 2, so [r(2), r(18)], which holds a new row with chance 16/20 = 80%
    assert R.order_interval([float(v) for v in range(19, 0, -1)]) == (2.0, 18.0)
    assert R.order_interval([float(v) for v in range(1, 10)]) == (1.0, 9.0)    # 9 rows: [min, max], 8/10
    assert R.order_interval([float(v) for v in range(1, 9)]) is None            # 8 rows cannot promise 80%
    assert R.order_interval([float(v) for v in range(1, 30)]) == (3.0, 27.0)    # 29 rows: j = 3


def test_confident_kind_uses_its_own_rows():
    residuals = [math.log(1 + 0.05 * i) for i in range(19)]           # ratios 1.00 .. 1.90
    table = _table(DENSE_PREFILL, residuals, "p") | _table(DENSE_DECODE, [0.0] * 3, "d")
    rng = R.range_for(DENSE_PREFILL, table)
    assert (rng.low, rng.high) == (residuals[1], residuals[17]) and rng.pooled == ""
    assert rng.rows == tuple(sorted(f"p{i}" for i in range(19)))
    # a plan's TTFT of 100 ms planned 1.05x-1.85x slow: the actual TTFT is 100/1.85 .. 100/1.05 ms
    assert rng.time_bounds(100.0) == pytest.approx((100 / 1.85, 100 / 1.05))
    # a rate planned 1.05x-1.85x too slow is that much too low
    assert rng.rate_bounds(10.0) == pytest.approx((10 * 1.05, 10 * 1.85))


def test_few_rows_fall_back_to_the_stack_widened():
    """Two MoE prefill rows (0.1x and 0.2x: plans 10x and 5x fast) on a stack with 19 dense rows
    (ratios 1.00-1.90): the range is the hull of the stack's interval and the two rows, widened by
    1.25x each way, and says it is a few-rows range."""
    stack = [math.log(1 + 0.05 * i) for i in range(19)]
    table = _table(DENSE_PREFILL, stack, "p") | _table(MOE_PREFILL, [math.log(0.1), math.log(0.2)], "m")
    rng = R.range_for(MOE_PREFILL, table)
    assert rng.pooled == "stack nxd-inference" and "few rows: 2 of this kind" in rng.note
    # the stack's 21 rows (19 dense + 2 MoE): j = 2, so [r(2), r(20)] = [log 0.2, log 1.85]
    assert math.exp(rng.low) == pytest.approx(0.1 / 1.25)      # the 0.1x row itself, widened
    assert math.exp(rng.high) == pytest.approx(1.85 * 1.25)
    # a kind with no rows on a stack that has too few: every row, widened
    other = R.Kind("dense", "train", "nxd-training")
    small = _table(other, [0.0, 0.1], "t") | _table(DENSE_PREFILL, stack, "p")
    rng = R.range_for(R.Kind("moe", "train", "nxd-training"), small)
    assert rng.pooled == "all rows" and rng.rows == ()
    # every row: 21 (19 + 0.0 and 0.1), j = 2: r(2) = 0.0 (two zeros), r(20) = log 1.85
    assert (rng.low, rng.high) == pytest.approx((-math.log(1.25), math.log(1.85) + math.log(1.25)))
    with pytest.raises(ValueError, match="needs 9 or more"):
        R.range_for(other, _table(other, [0.0] * 5, "x"))


def test_leave_one_out_coverage_counts_rows_inside_the_range_without_them():
    """19 distinct residuals 1..19: without row v, 18 rows remain, j = floor(0.1 x 19) = 1, so the
    range is [min, max] of the rest; every row but the two extremes is inside: 17 of 19."""
    table = _table(DENSE_DECODE, [float(v) for v in range(1, 20)], "d")
    cov = R.coverage(table)[DENSE_DECODE.key]
    assert (cov["rows"], cov["inside"]) == (19, 17) and cov["coverage"] == pytest.approx(17 / 19)
    assert not cov["few_rows"]
    # the median width: leaving out an interior row keeps [1, 19], a factor e^18
    assert cov["median_width"] == pytest.approx(math.exp(18))
    # 99 rows: without one, 98 remain, j = 9: rows of rank 10..90 of 99 are inside, 81 of 99
    big = R.coverage(_table(DENSE_DECODE, [v / 10 for v in range(99)], "b"))[DENSE_DECODE.key]
    assert big["inside"] == 81 and big["coverage"] >= R.COVERAGE


def test_ranges_table_covers_every_kind_a_plan_asks_for():
    stack = [math.log(1 + 0.05 * i) for i in range(19)]
    data = R.ranges_table(_table(DENSE_PREFILL, stack, "p"))
    assert {"dense/prefill/nxd-inference", "moe/decode/nxd-inference", "dense/train/none"} <= set(data["kinds"])
    assert data["kinds"]["dense/prefill/nxd-inference"]["pooled"] == ""
    assert data["kinds"]["moe/decode/nxd-inference"]["pooled"] == "stack nxd-inference"
    assert R.Kind.parse("dense/train/none") == R.Kind("dense", "train", "")


def test_stack_and_arch_of_rows():
    assert R.stack_of("Neuron 2.18.0 (Transformers NeuronX)") == "transformers-neuronx"
    assert R.stack_of("Neuron 2.24.0 (NxD Training, tutorial training_llama_tp_zero1)") == "nxd-training"
    assert R.stack_of("Neuron 2.15.0 (NxD, tutorial training_llama2_7b)") == "nxd-training"
    assert R.stack_of("NxD Inference tutorial (vLLM, LLMPerf, 1 concurrent request)") == "nxd-inference"
    assert R.stack_of("optimum-neuron vLLM benchmark (guidellm, synchronous)") == "optimum-neuron"
    assert R.is_moe({"num_experts": 128}) and R.is_moe({"text_config": {"num_local_experts": 16}})
    assert not R.is_moe({"num_experts": 0}) and not R.is_moe({"hidden_size": 8})


def test_a_plan_report_gets_its_kinds_ranges():
    """A deployed dense generate plan: TTFT from the prefill kind, TPOT from the decode kind, the
    output rate from both parts of its time; the report names the rows and the rule."""
    prefill = [math.log(1 + 0.05 * i) for i in range(19)]            # plans 1.00x .. 1.90x slow
    decode = [math.log(0.5)] * 19                                    # plans 2x fast, always
    data = R.ranges_table(_table(DENSE_PREFILL, prefill, "p") | _table(DENSE_DECODE, decode, "d"))
    report = {"mode": "deployed", "moe": False, "batch": 1, "output_tokens": 11, "ttft_ms": 100.0,
              "tpot_ms": 10.0, "output_tokens_per_s": 11 / 0.2}       # 0.1 s TTFT + 10 x 10 ms = 0.2 s
    RR.attach(report, data)
    assert report["ttft_ms_range"] == pytest.approx([100 / 1.85, 100 / 1.05])
    assert report["tpot_ms_range"] == pytest.approx([20.0, 20.0])
    # actual time between 0.1/1.85 + 0.2 and 0.1/1.05 + 0.2 s
    assert report["output_tokens_per_s_range"] == pytest.approx([11 / (0.1 / 1.05 + 0.2), 11 / (0.1 / 1.85 + 0.2)])
    assert report["ranges"]["prefill"]["kind"] == "dense/prefill/nxd-inference"
    assert report["ranges"]["prefill"]["rows"] == sorted(f"p{i}" for i in range(19))
    rows = RR.with_ranges(report, [("TTFT", "100 ms"), ("MFU", "3%")])
    assert rows == [("TTFT", "100 ms (80% range 54.1 ms to 95.2 ms)"), ("MFU", "3%")]
    assert any("decode (dense/decode/nxd-inference)" in line for line in RR.basis_lines(report))
    # a training plan: the step time and both rates from the train kind (none here: every row, widened)
    train = RR.attach({"step_time_s": 2.0, "tokens_per_s": 100.0, "sequences_per_s": 1.0, "moe": False}, data)
    assert train["ranges"]["train"]["pooled"] == "all rows"
    low, high = train["step_time_s_range"]
    assert low < 2.0 / 1.25 and high > 2.0 and train["tokens_per_s_range"][0] == pytest.approx(100 * 2.0 / high)
