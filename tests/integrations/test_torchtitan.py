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
import signal
import subprocess
import sys
import time

import pytest

from tests.distributed.dist_harness import REPO, free_port

EXAMPLE = os.path.join(REPO, "examples", "torchtitan_llama3_debug.py")
# ~25 min of launches and a 1 GB triton download: run on demand by .ci/torchtitan, not by .ci/run
pytestmark = pytest.mark.torchtitan

LOSS = re.compile(r"step:\s+(\d+)\s+loss:\s+([0-9.]+)")


def _start(tmp, name, nproc, *args, device="neuron"):
    """One torchrun launch of the example, started; `_finish` waits for it and reads its losses."""
    env = dict(os.environ, OMP_NUM_THREADS="1", TITAN_ASSETS=str(tmp / "assets"), TITAN_DUMP=str(tmp / name),
               PYTHONPATH=os.pathsep.join([REPO, os.environ.get("TORCH_NEURONX_TITAN_SITE", ""),
                                           os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
           f"--master-port={free_port()}", EXAMPLE, "--device", device, "--metrics.disable-color-printing",
           "--comm.init-timeout-seconds", "300", *args, "activation-checkpoint:none"]  # tyro: subcommand last
    log = tmp / f"{name}-{device}.log"   # a file, not a pipe: launches that run together never block on output
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, log, f"{name} ({device}, {nproc} ranks)", time.monotonic()


def _finish(launch):
    proc, log, what, started = launch
    try:
        proc.wait(timeout=900)  # only a hang takes that long
    finally:
        if proc.poll() is None:   # gave up (or interrupted): end the launcher and its ranks
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    print(f"launch {what}: {time.monotonic() - started:.0f} s")  # shown with -rP
    out = log.read_text()
    assert proc.returncode == 0, f"{what} failed (exit {proc.returncode}; {log}), its last lines:\n" + out[-6000:]
    return {int(step): float(loss) for step, loss in LOSS.findall(out)}


def _launch(tmp, name, nproc, *args, device="neuron"):
    return _finish(_start(tmp, name, nproc, *args, device=device))


def _together(*launches):
    """Launches that do not depend on each other, run at once: a launch spends much of its time waiting
    (rendezvous, process-group setup, the ranks' start), which the other fills."""
    started = []
    try:
        for tmp, name, nproc, args, device in launches:
            started.append(_start(tmp, name, nproc, *args, device=device))
    finally:
        results = []
        for launch in started:   # each is waited for (and ended, if the test gives up) before any fails
            try:
                results.append(_finish(launch))
            except AssertionError as e:
                results.append(e)
    for r in results:
        if isinstance(r, AssertionError):
            raise r
    return results


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
LARGE = {"qwen3_moe"}
TP, EP, PP = ("--parallelism.tensor-parallel-degree", "--parallelism.expert-parallel-degree",
              "--parallelism.pipeline-parallel-degree")
# Every CI run (.ci/torchtitan-smoke, marker `torchtitan_ci`) trains Qwen3, Qwen3 MoE, DeepSeek-V3 and GPT-OSS
# in the smallest layout that exercises its parallelism: FSDP 2 for the dense one, EP 2 x FSDP 2 for the MoE ones.
CI = pytest.mark.torchtitan_ci
LAYOUTS = [  # (model, name, ranks, options); FSDP shards whatever the other degrees leave of the ranks
    ("llama3", "fsdp2", 2, []),  # not in every CI run: Qwen3's FSDP 2 takes the same dense path
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
def seeds(request, tmp_path_factory):
    """One seed checkpoint per model (TorchTitan's way to start runs of any layout alike), made two at a
    time for all the models this session's selected layouts train, on first use."""
    made = {}
    wanted = list(dict.fromkeys(item.callspec.params["model"] for item in request.session.items
                                if getattr(item, "callspec", None) and "model" in item.callspec.params
                                and item.originalname == "test_documented_model_layout_matches_cpu"))

    def seed(model):
        if model not in made:
            todo = [m for m in wanted if m not in made] or [model]
            for pair in (todo[i:i + 2] for i in range(0, len(todo), 2)):
                tmps = {m: tmp_path_factory.mktemp(f"seed_{m}") for m in pair}
                _together(*[(tmps[m], "seed", 1, [*MODELS[m], "--checkpoint.enable",
                                                  "--checkpoint.create-seed-checkpoint"], "neuron") for m in pair])
                made.update({m: (tmps[m], str(tmps[m] / "seed" / "checkpoint" / "step-0")) for m in pair})
        return made[model]

    return seed


@pytest.mark.parametrize("model,layout,ranks,options", LAYOUTS, ids=[_layout_id(x) for x in LAYOUTS])
def test_documented_model_layout_matches_cpu(seeds, model, layout, ranks, options):
    import torchtitan  # noqa: F401  (installed by .ci/torchtitan: a missing one fails here, it does not skip)

    tmp, seed = seeds(model)
    args = [*MODELS[model], "--checkpoint.enable", "--checkpoint.initial-load-path", seed, *options]
    # one after the other: 4-rank layouts (two at once would be 8 ranks on CI's 2 cores) and the models whose
    # ranks need several GB each (Qwen3 MoE's 64 experts: 4.7 GB in a CPU rank, so two launches at once
    # were killed for memory on a 24 GB host)
    if ranks > 2 or model in LARGE:
        neuron, cpu = _launch(tmp, f"{layout}_neuron", ranks, *args), _launch(tmp, f"{layout}_cpu", ranks, *args,
                                                                                device="cpu")
    else:
        neuron, cpu = _together((tmp, f"{layout}_neuron", ranks, args, "neuron"), (tmp, f"{layout}_cpu", ranks, args, "cpu"))
    assert sorted(neuron) == [1, 2, 3], neuron
    assert neuron[3] < neuron[1], f"loss did not fall: {neuron}"
    print(f"losses {model} {layout}: neuron {neuron}, cpu {cpu}")  # shown with -rP
    assert cpu == pytest.approx(neuron, abs=5e-5), f"neuron {neuron} vs cpu {cpu}"
