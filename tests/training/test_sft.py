"""The TRL SFT example script on neuron, one process and TP x FSDP, against a CPU run."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.training import sft_harness
from tests.training.sft_harness import max_diff, sft

FP32 = ("--dtype", "float32", "--bf16", "false")


def test_single_process_fp32_matches_cpu_run(neuron_fp32, fp32_runs):
    _, neuron = neuron_fp32
    cpu, _ = fp32_runs["cpu"]
    assert neuron["device"] == "neuron:0" and neuron["distributed_type"] == "DistributedType.NO"
    assert neuron["pad_to_multiple_of"] == 128  # TRL's neuron default, decided from args.device
    assert cpu["device"] == "cpu" and cpu["pad_to_multiple_of"] is None
    assert len(neuron["losses"]) == 4
    assert neuron["losses"] == cpu["losses"]  # docs/training.md: fp32 one process, |Δ| 0
    assert neuron["losses"][-1] < neuron["losses"][0]  # it trains


@pytest.mark.parametrize("tp,fsdp", [(2, 2), (1, 2), (2, 1)], ids=["tp2xfsdp2", "tp1xfsdp2", "tp2xfsdp1"])
def test_tp_x_fsdp_losses_match_single_process(tp, fsdp, neuron_fp32, tp2_fsdp2, request):
    if (tp, fsdp) == (2, 2):
        _, summary = tp2_fsdp2  # loaded with HF_DEACTIVATE_ASYNC_LOAD=1; the others without it
    else:
        summary, _ = request.getfixturevalue("one_axis_runs")[(tp, fsdp)]
    assert summary["distributed_type"] == "DistributedType.MULTI_NEURON"
    assert summary["num_processes"] == tp * fsdp
    assert summary["device"] == "neuron:0"
    ref = neuron_fp32[1]["losses"]
    if tp == 1:  # docs/training.md: FSDP alone reproduces the single process exactly
        assert summary["losses"] == ref
    else:  # TP's row-parallel partial sums add in another order: a few float32 ulps (docs/training.md)
        assert max_diff(summary["losses"], ref) <= 1e-5, (summary["losses"], ref)


@pytest.fixture(scope="module")
def one_axis_runs(assets, sft_root):
    """TP alone and FSDP alone, 2 ranks each, both launches at once."""
    return sft_harness.sft_all(assets, {(tp, fsdp): (str(sft_root / f"tp{tp}-fsdp{fsdp}"), FP32,
                                                     dict(nproc=tp * fsdp, tp=tp, fsdp=fsdp))
                                        for tp, fsdp in ((1, 2), (2, 1))})


def _check_checkpoint(initial: str, sharded: str, single: str) -> dict:
    """The checkpoint as a CPU user reads it: plain tensors with the original names, shapes and dtypes, a
    config and tokenizer, and the logits of the sharded run's model against the single-process run's."""
    import torch
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM, AutoTokenizer

    def tensors(path):
        with safe_open(os.path.join(path, "model.safetensors"), "pt") as f:
            return {k: f.get_tensor(k) for k in f.keys()}
    a, b = tensors(initial), tensors(sharded)
    assert sorted(a) == sorted(b), (sorted(a), sorted(b))
    for k in a:
        assert type(b[k]) is torch.Tensor and b[k].device.type == "cpu", k
        assert b[k].shape == a[k].shape and b[k].dtype == a[k].dtype, (k, b[k].shape, b[k].dtype)
    config = json.load(open(os.path.join(sharded, "config.json")))
    assert config["architectures"] == ["Qwen3ForCausalLM"] and "distributed_config" not in config, config
    tok = AutoTokenizer.from_pretrained(sharded)
    assert tok.chat_template and "<|im_start|>" in tok.chat_template
    ids = tok.apply_chat_template([{"role": "user", "content": "Tell me about the moon."}],
                                  add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
    logits = {}
    for name, path in (("initial", initial), ("sharded", sharded), ("single", single)):
        model = AutoModelForCausalLM.from_pretrained(path)
        assert model.device.type == "cpu"
        with torch.no_grad():
            logits[name] = model(ids).logits
    return {"vs_single": (logits["sharded"] - logits["single"]).abs().max().item(),
            "vs_initial": (logits["sharded"] - logits["initial"]).abs().max().item()}


def test_checkpoint_after_tp_x_fsdp_loads_on_cpu(tp2_fsdp2, neuron_fp32, assets):
    """save_model after TP2 x FSDP2: plain tensors, original names/shapes/dtypes, tokenizer + chat template;
    loaded on CPU (in this process: a fresh interpreter only added its start), it reproduces the logits of
    the single-process run."""
    sharded, _ = tp2_fsdp2
    single, _ = neuron_fp32
    result = _check_checkpoint(os.path.join(assets, "model"), sharded, single)
    assert result["vs_single"] <= 1e-4, result
    assert result["vs_initial"] > 1e-2, result  # training changed the weights


@pytest.fixture(scope="module")
def resumed_and_compiled(neuron_fp32, assets, sft_root):
    """Two runs that need the fp32 reference first, started together: a resume from its checkpoint-2, and
    --torch_compile true with TRL's default gradient checkpointing (said, not left to TRL's default)."""
    ckpt = os.path.join(neuron_fp32[0], "checkpoint-2")
    return sft_harness.sft_all(assets, {
        "resumed": (str(sft_root / "resumed"), (*FP32, "--save_only_model", "false", "--resume_from_checkpoint", ckpt),
                    {}),
        "compiled": (str(sft_root / "compiled"), (*FP32, "--torch_compile", "true", "--gradient_checkpointing", "true"),
                     {}),
    }, timeout=400)


def test_resume_from_checkpoint_continues_with_same_losses(neuron_fp32, resumed_and_compiled):
    """Optimizer, scheduler and data order restored from checkpoint-2: steps 3-4 repeat the uninterrupted run."""
    ref_dir, ref = neuron_fp32
    ckpt = os.path.join(ref_dir, "checkpoint-2")
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json"):
        assert os.path.exists(os.path.join(ckpt, name)), name
    resumed, _ = resumed_and_compiled["resumed"]
    assert resumed["global_step"] == 4
    assert resumed["losses"][2:] == ref["losses"][2:]


def test_trainer_checkpoint_has_neuron_rng_state(neuron_fp32):
    """The SFT run's Trainer checkpoint carries the neuron generators' states (trainer_rng adapter)."""
    import torch

    rng = torch.load(os.path.join(neuron_fp32[0], "checkpoint-2", "rng_state.pth"), weights_only=False)
    assert "neuron" in rng, sorted(rng)
    states = rng["neuron"]
    assert len(states) == torch.neuron.device_count(), len(states)
    assert all(isinstance(s, torch.Tensor) and s.dtype == torch.uint8 and s.numel() > 0 for s in states)


_RNG_ROUND_TRIP = r"""
import json, os, sys, torch
from transformers import Trainer, TrainingArguments

out = sys.argv[1]
n = torch.neuron.device_count()
def draws():
    return [torch.rand(6, device=f"neuron:{i}").cpu() for i in range(n)]

trainer = Trainer(model=torch.nn.Linear(4, 4), args=TrainingArguments(output_dir=out, report_to="none"))
assert trainer.args.device.type == "neuron", trainer.args.device
torch.neuron.manual_seed_all(1234)
draws()                                   # move the generators away from a plain seed
trainer._save_rng_state(out)
after_save = draws()
torch.neuron.manual_seed_all(999)
other = draws()                           # what the generators would give without a restore
trainer._load_rng_state(out)
after_load = draws()

cpu_out = os.path.join(out, "cpu")
cpu_trainer = Trainer(model=torch.nn.Linear(4, 4),
                      args=TrainingArguments(output_dir=cpu_out, report_to="none", use_cpu=True))
cpu_trainer._save_rng_state(cpu_out)
print(json.dumps({
    "restored": all(torch.equal(a, b) for a, b in zip(after_save, after_load)),
    "control_differs": not any(torch.equal(a, b) for a, b in zip(after_save, other)),
    "cpu_keys": sorted(torch.load(os.path.join(cpu_out, "rng_state.pth"), weights_only=False)),
}))
"""


def test_trainer_rng_state_round_trip_restores_neuron_generators(tmp_path):
    """A real Trainer on neuron: _load_rng_state after a reseed makes every NeuronCore's generator draw
    exactly what it drew right after _save_rng_state; a CPU Trainer's checkpoint gets no neuron entry."""
    proc = subprocess.run([sys.executable, "-c", _RNG_ROUND_TRIP, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"}, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["control_differs"], result  # a reseed alone would not reproduce the draws
    assert result["restored"], result
    assert "neuron" not in result["cpu_keys"] and "cpu" in result["cpu_keys"], result


def test_bf16_accepted_without_use_cpu_and_matches_cpu(assets, sft_root):
    """--dtype bfloat16 with TRL's default bf16=True: no --use_cpu on neuron; CPU needs it."""
    runs = sft_harness.sft_all(assets, {
        "neuron": (str(sft_root / "neuron-bf16"), ("--dtype", "bfloat16"), {}),
        "cpu": (str(sft_root / "cpu-bf16"), ("--dtype", "bfloat16", "--use_cpu", "true"), {}),
    })
    (neuron, _), (cpu, _) = runs["neuron"], runs["cpu"]
    assert neuron["bf16"] is True and neuron["device"] == "neuron:0"
    assert neuron["losses"] == cpu["losses"]  # docs/training.md: bf16 one process, |Δ| 0


def test_torch_compile_with_gradient_checkpointing_uses_neuron_backend_once_per_shape(
        neuron_fp32, resumed_and_compiled):
    """--torch_compile true with TRL's default gradient checkpointing (the recomputed attention runs
    inside the compiled graph through the RNG higher-order ops, compiler/_rng_hops.py): backend
    "neuron", dynamic=False, compiles once per graph (all packed batches are [2, 128]), and the
    eager run's losses to a few float32 ulps (Inductor's fused kernels round differently)."""
    summary, _ = resumed_and_compiled["compiled"]
    assert summary["torch_compile_backend"] == "neuron"
    assert summary["torch_compile_kwargs"] == {"backend": "neuron", "dynamic": "False"}
    metrics = summary["compile_metrics"]
    assert metrics["recompilations"] == 0 and metrics["fallbacks"] == 0, metrics
    assert 1 <= metrics["graphs_compiled"] <= 4, metrics  # one program per graph, not per step
    assert max_diff(summary["losses"], neuron_fp32[1]["losses"]) <= 1e-5, (summary["losses"], neuron_fp32[1])


def test_tp_fsdp_product_must_match_process_count(assets, sft_root):
    summary, proc = sft(assets, str(sft_root / "bad-world"), *FP32, nproc=2, tp=2, fsdp=2, check=False,
                        timeout=120)
    assert proc.returncode != 0 and summary is None
    assert "TP_SIZE x FSDP_SIZE = 2 x 2 = 4 does not match the 2 processes" in proc.stdout


def test_tp_size_must_divide_model_dimensions(assets, monkeypatch):
    """The example's own check, called in this process (a fresh interpreter cost ~10 s for a message)."""
    import torch

    for name, value in (("WORLD_SIZE", "3"), ("TP_SIZE", "3"), ("FSDP_SIZE", "1")):
        monkeypatch.setenv(name, value)
    # Importing the example sets automatic_dynamic_shapes for its own runs; the suite's later tests keep
    # theirs. Not monkeypatch.setattr: pytest 9.2 undoes it with delattr, and deleting a Dynamo config
    # entry hides it, which broke every later compile in the worker ("... does not exist").
    with torch._dynamo.config.patch(automatic_dynamic_shapes=torch._dynamo.config.automatic_dynamic_shapes):
        from sft_neuron_example import _distributed_config  # examples/ is on sys.path (sft_harness)

        with pytest.raises(SystemExit, match="TP_SIZE=3 does not divide the model's num_attention_heads=4"):
            _distributed_config(os.path.join(assets, "model"), False)
