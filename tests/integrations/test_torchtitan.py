"""TorchTitan (the PyPI release, unchanged) trains its Llama 3 debug model on neuron under torchrun.

One seed checkpoint (TorchTitan's own way to start differently-parallelised runs from the same
weights) feeds three 2-rank launches of `examples/torchtitan_llama3_debug.py`:
  1. neuron, FSDP2, `--compile.enable --compile.backend neuron`, distributed checkpoint every 2 steps;
  2. neuron again, resuming from that run's step-2 checkpoint: its step 3 equals run 1's step 3;
  3. the CPU/gloo reference of run 1 (eager): its losses equal run 1's within fp32 tolerance.
A second test does the same for SimpleFSDP (TorchTitan's `experiments/graph_trainer`): its Llama 3
debug model (SDPA attention) compiled whole with `--compile.mode jit --compile.backend neuron` on 2
ranks, against the eager CPU/gloo run of its `_sdpa_eager` config, both from one seed checkpoint.
Shapes are TorchTitan's debug model (6 layers, dim 256) on 64-token sequences, 3 steps.
`test_documented_model_layout_matches_cpu` does the same for Qwen3, DeepSeek-V3 and GPT-OSS (TorchTitan's
debug configs) in every layout listed there: FSDP2, TP x FSDP, EP x FSDP, TP x EP x FSDP, PP. TorchTitan
0.3.0 imports triton, which .ci/run installs outside site-packages at $TORCH_NEURONX_TITAN_SITE; the
launches put that folder on their path.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from tests.distributed.dist_harness import REPO, free_port

EXAMPLE = os.path.join(REPO, "examples", "torchtitan_llama3_debug.py")
# ~25 min of launches and a 1 GB triton download: run on demand by .ci/torchtitan, not by .ci/run
pytestmark = pytest.mark.torchtitan

LOSS = re.compile(r"step:\s+(\d+)\s+loss:\s+([0-9.]+)")


def _launch(tmp, name, nproc, *args, device="neuron"):
    env = dict(os.environ, OMP_NUM_THREADS="1", TITAN_ASSETS=str(tmp / "assets"), TITAN_DUMP=str(tmp / name),
               PYTHONPATH=os.pathsep.join([REPO, os.environ.get("TORCH_NEURONX_TITAN_SITE", ""),
                                           os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
           f"--master-port={free_port()}", EXAMPLE, "--device", device, "--metrics.disable-color-printing",
           "--comm.init-timeout-seconds", "120", *args, "activation-checkpoint:none"]  # tyro: subcommand last
    started = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)  # only a hang takes that long
    print(f"launch {name} ({device}, {nproc} ranks): {time.monotonic() - started:.0f} s")  # shown with -rP
    out = p.stdout + p.stderr
    assert p.returncode == 0, f"{name} failed:\n" + "\n".join(
        line for line in out.splitlines() if "[rank" in line or "Error" in line)[-8000:]
    return {int(step): float(loss) for step, loss in LOSS.findall(out)}


def test_llama3_debug_model_fsdp_compile_checkpoint_match_cpu(tmp_path):
    import torchtitan  # noqa: F401  (installed by .ci/torchtitan: a missing one fails here, it does not skip)

    _launch(tmp_path, "seed", 1, "--checkpoint.enable", "--checkpoint.create-seed-checkpoint")
    seed = str(tmp_path / "seed" / "checkpoint" / "step-0")
    ckpt = ["--checkpoint.enable", "--checkpoint.initial-load-path", seed, "--checkpoint.interval", "2",
            "--checkpoint.no-last-save-model-only"]

    compiled = _launch(tmp_path, "neuron", 2, *ckpt, "--compile.enable", "--compile.backend", "neuron")
    assert sorted(compiled) == [1, 2, 3], compiled
    assert compiled[3] < compiled[1], f"loss did not fall: {compiled}"
    assert os.path.isdir(tmp_path / "neuron" / "checkpoint" / "step-2")

    resumed = _launch(tmp_path, "neuron", 2, *ckpt, "--compile.enable", "--compile.backend", "neuron",
                      "--checkpoint.load-step", "2")
    assert sorted(resumed) == [3], f"resume should train step 3 only: {resumed}"
    assert resumed[3] == pytest.approx(compiled[3], abs=2e-5)

    cpu = _launch(tmp_path, "cpu", 2, *ckpt, device="cpu")
    print(f"losses: neuron compiled {compiled}, resumed {resumed}, cpu eager {cpu}")  # shown with -rP
    assert cpu == pytest.approx(compiled, abs=5e-5), f"neuron {compiled} vs cpu {cpu}"


SIMPLE_FSDP = ["--module", "graph_trainer.llama3", "--config", "graph_trainer_llama3_debugmodel_sdpa"]


def test_simple_fsdp_llama3_debug_model_compiled_neuron_matches_cpu(tmp_path):
    import torchtitan.experiments.graph_trainer.simple_fsdp  # noqa: F401  (a missing one fails, it does not skip)

    _launch(tmp_path, "seed", 1, *SIMPLE_FSDP, "--checkpoint.enable", "--checkpoint.create-seed-checkpoint")
    seed = ["--checkpoint.enable", "--checkpoint.initial-load-path", str(tmp_path / "seed" / "checkpoint" / "step-0")]

    # the graph trainer's "jit" mode is torch.compile(model, backend=--compile.backend, fullgraph=True)
    # over the SimpleFSDP-wrapped model; its default mode ("aot_fx_trace") ignores the backend
    compiled = _launch(tmp_path, "neuron", 2, *SIMPLE_FSDP, *seed, "--compile.mode", "jit",
                       "--compile.backend", "neuron")
    assert sorted(compiled) == [1, 2, 3], compiled
    assert compiled[3] < compiled[1], f"loss did not fall: {compiled}"

    # the same model, SimpleFSDP eager (compile off, no graph capture), on CPU tensors over gloo
    cpu = _launch(tmp_path, "cpu", 2, "--module", "graph_trainer.llama3", "--config",
                  "graph_trainer_llama3_debugmodel_sdpa_eager", *seed, device="cpu")
    print(f"losses: neuron SimpleFSDP compiled {compiled}, cpu eager {cpu}")  # shown with -rP
    assert cpu == pytest.approx(compiled, abs=5e-5), f"neuron {compiled} vs cpu {cpu}"


# TorchTitan's other documented models, each from one seed checkpoint, every layout launched on neuron and
# as its CPU/gloo reference. Qwen3 and DeepSeek-V3 take `varlen` attention from
# examples/torchtitan_neuron_configs.py (their registries default to FlexAttention, which torch 2.13 cannot
# train on neuron or CPU); GPT-OSS uses varlen already. GPT-OSS computes its experts in bf16 whatever the
# parameter dtype (torchtitan/models/gpt_oss/moe.py:162), so it trains with bf16 parameters, TorchTitan's
# default; the others in fp32. Context parallelism is not here: TorchTitan 0.3.0 supports it only with
# FlexAttention (torchtitan/models/llama3/model.py:75 and the same check in each model).
MODELS = {
    "llama3": [],  # the example's default: --module llama3 --config llama3_debugmodel_varlen_attn
    "qwen3": ["--module", "torchtitan_neuron_configs", "--config", "qwen3_debugmodel_varlen"],
    "qwen3_moe": ["--module", "torchtitan_neuron_configs", "--config", "qwen3_moe_debug_varlen"],
    "deepseek_v3": ["--module", "torchtitan_neuron_configs", "--config", "deepseek_v3_debugmodel_varlen"],
    "gpt_oss": ["--module", "gpt_oss", "--config", "gpt_oss_debugmodel", "--validator.no-enable",
                "--training.mixed-precision-param", "bfloat16", "--training.disable-cuda-graphs"],
}
TP, EP, PP = ("--parallelism.tensor-parallel-degree", "--parallelism.expert-parallel-degree",
              "--parallelism.pipeline-parallel-degree")
# Every CI run (.ci/torchtitan-smoke, marker `torchtitan_ci`) trains each documented model in the smallest
# layout that exercises its parallelism: FSDP 2 for the dense ones, EP 2 x FSDP 2 for the MoE ones.
CI = pytest.mark.torchtitan_ci
LAYOUTS = [  # (model, name, ranks, options); FSDP shards whatever the other degrees leave of the ranks
    pytest.param("llama3", "fsdp2", 2, [], marks=CI),
    pytest.param("qwen3", "fsdp2", 2, [], marks=CI),
    ("qwen3", "tp2_fsdp2", 4, [TP, "2"]),  # Qwen3's dense debug model ties its embedding to the output:
    ("qwen3_moe", "pp2", 2, [PP, "2"]),    # TorchTitan refuses PP with a tie; its MoE debug model has none
    pytest.param("qwen3_moe", "ep2_fsdp2", 2, [EP, "2"], marks=CI),
    ("deepseek_v3", "fsdp2", 2, []),
    pytest.param("deepseek_v3", "ep2_fsdp2", 2, [EP, "2"], marks=CI),
    ("deepseek_v3", "pp2", 2, [PP, "2"]),
    ("deepseek_v3", "tp2_ep2_fsdp2", 4, [TP, "2", EP, "2"]),
    ("gpt_oss", "fsdp2", 2, []),
    pytest.param("gpt_oss", "ep2_fsdp2", 2, [EP, "2"], marks=CI),
    ("gpt_oss", "pp2", 2, [PP, "2"]),
    ("gpt_oss", "tp2_ep2_fsdp2", 4, [TP, "2", EP, "2"]),
]


def _layout_id(layout):
    model, name = (layout.values if hasattr(layout, "values") else layout)[:2]
    return f"{model}-{name}"


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    """One seed checkpoint per model, made on first use (TorchTitan's way to start runs of any layout alike)."""
    made = {}

    def seed(model):
        if model not in made:
            tmp = tmp_path_factory.mktemp(f"seed_{model}")
            _launch(tmp, "seed", 1, *MODELS[model], "--checkpoint.enable", "--checkpoint.create-seed-checkpoint")
            made[model] = (tmp, str(tmp / "seed" / "checkpoint" / "step-0"))
        return made[model]

    return seed


@pytest.mark.parametrize("model,layout,ranks,options", LAYOUTS, ids=[_layout_id(x) for x in LAYOUTS])
def test_documented_model_layout_matches_cpu(seeds, model, layout, ranks, options):
    import torchtitan  # noqa: F401  (installed by .ci/torchtitan: a missing one fails here, it does not skip)

    tmp, seed = seeds(model)
    args = [*MODELS[model], "--checkpoint.enable", "--checkpoint.initial-load-path", seed, *options]
    neuron = _launch(tmp, f"{layout}_neuron", ranks, *args)
    assert sorted(neuron) == [1, 2, 3], neuron
    assert neuron[3] < neuron[1], f"loss did not fall: {neuron}"
    cpu = _launch(tmp, f"{layout}_cpu", ranks, *args, device="cpu")
    print(f"losses {model} {layout}: neuron {neuron}, cpu {cpu}")  # shown with -rP
    assert cpu == pytest.approx(neuron, abs=5e-5), f"neuron {neuron} vs cpu {cpu}"
