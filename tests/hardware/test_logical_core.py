"""One logical-core view per (instance, LNC) and one resolver of TORCH_NEURONX_INSTANCE_TYPE /
NEURON_LOGICAL_NC_CONFIG: the figures against the published table (docs/virtual-runtime.md,
docs/hardware-sources.md C1/C2), every user reading the same view, and one bad input giving the
same words from the runtime, the cost model, the planner and the tools."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import neuron_hardware
from torch_neuronx.estimate import hardware
from torch_neuronx.plan.distributed._launch import LaunchError, pick_instance
from torch_neuronx.plan.models._layout import LayoutError, make_layout
from torch_neuronx.runtime import discover, env, resolve
from torch_neuronx.tools import ls
from torch_neuronx.tools.api.devices import instance_view

GiB = 1 << 30
T = 1e12
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Published per-chip figures: physical cores, HBM, HBM bandwidth, dense bf16 / fp8 / fp32 per physical core
CHIP = {"trn1": (2, 32 * GiB, 820 * GiB, 92 * T, 92 * T, 23 * T),
        "trn2": (8, 96 * GiB, 2.9 * T, 79 * T, 158 * T, 20 * T),
        "trn3": (8, 144 * GiB, 4.9 * T, 79 * T, 315 * T, 20 * T)}
# docs/virtual-runtime.md's table: instance -> {LNC: (logical cores, HBM per logical core)}, and the
# links: NeuronLink per chip, EFA per instance (Gbps / 8)
INSTANCES = {
    "trn1.2xlarge": {1: (2, 16 * GiB)},
    "trn1.32xlarge": {1: (32, 16 * GiB)},
    "trn2.3xlarge": {1: (8, 12 * GiB), 2: (4, 24 * GiB)},
    "trn2.48xlarge": {1: (128, 12 * GiB), 2: (64, 24 * GiB)},
    "trn2u.48xlarge": {1: (128, 12 * GiB), 2: (64, 24 * GiB)},
    "trn3.3xlarge": {1: (8, 18 * GiB), 2: (4, 36 * GiB)},
    "trn3.48xlarge": {1: (128, 18 * GiB), 2: (64, 36 * GiB)},
}
LINKS = {"trn1.32xlarge": (384e9, 800e9 / 8), "trn2.48xlarge": (1024e9, 3200e9 / 8),
         "trn2u.48xlarge": (1024e9, 3200e9 / 8), "trn3.48xlarge": (2560e9, 3200e9 / 8)}
KNOWN = ", ".join(sorted(INSTANCES))
ALL = [(name, lnc) for name, by_lnc in INSTANCES.items() for lnc in by_lnc]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in (env.INSTANCE_TYPE, env.LOGICAL_NC_CONFIG, env.VISIBLE_CORES, env.NUM_CORES,
                 env.HBM_BYTES_PER_CORE, env.ESTIMATE_ASSUMPTIONS):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_every_instance_at_every_lnc_matches_the_published_figures():
    assert set(neuron_hardware.INSTANCES) == set(INSTANCES)
    for name, lnc in ALL:
        v = neuron_hardware.logical_core_view(name, lnc)
        physical, hbm, hbm_bw, bf16, fp8, fp32 = CHIP[v.chip.name]
        cores, hbm_per_core = INSTANCES[name][lnc]
        assert (v.instance.name, v.lnc, v.name) == (name, lnc, f"{name} LNC={lnc}")
        assert v.cores_per_instance == cores and v.cores_per_chip == physical // lnc
        assert v.cores_per_chip * v.chips == cores and v.hbm_bytes == hbm_per_core == hbm * lnc // physical
        assert v.hbm_bytes_per_s == pytest.approx(hbm_bw * lnc / physical)
        assert (v.tensor_peak("bfloat16"), v.tensor_peak("float8_e4m3fn"), v.tensor_peak("float32")) == \
            pytest.approx((bf16 * lnc, fp8 * lnc, fp32 * lnc))
        assert v.tensor_flops["float16"] == v.tensor_peak("bfloat16")
        assert v.sbuf_bytes == 128 * v.chip.sbuf_partition_bytes * lnc
        link, efa = LINKS.get(name, (v.chip.neuronlink_bytes_per_s, 0.0))
        assert (v.neuronlink_bytes_per_s, v.efa_bytes_per_s) == (link, efa)
    # the chip's default LNC when none is given: 2 on trn2/trn3, 1 on trn1
    assert [neuron_hardware.logical_core_view(n).lnc for n in ("trn1.32xlarge", "trn2.3xlarge", "trn3.48xlarge")] \
        == [1, 2, 2]


def test_physical_cores_and_torus():
    v = neuron_hardware.logical_core_view("trn2.48xlarge", 2)
    assert v.physical_cores(0, 0) == (0, 1) and v.physical_cores(3, 2) == (28, 29)
    assert neuron_hardware.logical_core_view("trn3.3xlarge", 1).physical_cores(0, 5) == (5,)
    # 4x4 torus, neuron-ls order up, left, down, right, wrapping at the edges
    assert v.torus_neighbours(5) == (1, 4, 9, 6) and v.torus_neighbours(0) == (12, 3, 4, 1)
    assert neuron_hardware.logical_core_view("trn1.2xlarge").torus_neighbours(0) == ()


def test_runtime_tools_cost_model_and_planner_read_the_one_view(clean_env):
    for name, lnc in ALL:
        v = neuron_hardware.logical_core_view(name, lnc)
        clean_env.setenv(env.INSTANCE_TYPE, name)
        clean_env.setenv(env.LOGICAL_NC_CONFIG, str(lnc))
        clean_env.setenv(env.VISIBLE_CORES, "0")   # 128-core instances exceed one process's devices
        assert resolve() == v
        topo = discover()
        assert (topo.view, topo.total_logical_cores, topo.cores[0].hbm_bytes) == (v, v.cores_per_instance, v.hbm_bytes)
        assert topo.cores[0].physical_cores == v.physical_cores(0, 0)
        tools = instance_view()
        assert (tools.view, tools.cores_per_chip, tools.hbm_per_core) == (v, v.cores_per_chip, v.hbm_bytes)
        assert tools.chips[0].memory_bytes == v.chip.hbm_bytes and tools.chips[0].logical_cores == (0,)
        hw = hardware()
        assert (hw.logical_cores, hw.hbm_bytes_per_s, hw.tensor_flops("bfloat16")) == \
            (v.cores_per_instance, v.hbm_bytes_per_s, v.tensor_peak("bfloat16"))
        layout = make_layout(name, lnc)
        assert (layout.cores_per_node, layout.hbm_bytes_per_core) == (v.cores_per_instance, v.hbm_bytes)
        assert pick_instance(1, None) == name


def test_explicit_arguments_win_and_a_foreign_lnc_is_an_error(clean_env):
    clean_env.setenv(env.INSTANCE_TYPE, "trn2.48xlarge")
    clean_env.setenv(env.LOGICAL_NC_CONFIG, "2")
    assert resolve().name == "trn2.48xlarge LNC=2"
    assert resolve("trn3.3xlarge", 1).name == "trn3.3xlarge LNC=1"
    assert hardware("trn1.32xlarge", 1).name == "trn1.32xlarge LNC=1"
    # an explicit trn1 with the environment's LNC=2: the environment's value is checked and named,
    # by the runtime, the cost model and the launcher alike (no silent fallback to the chip's LNC)
    words = "NEURON_LOGICAL_NC_CONFIG=2 is not supported on trn1; use 1."
    with pytest.raises(env.NeuronEnvironmentError) as err:
        hardware("trn1.32xlarge")
    assert str(err.value) == words
    with pytest.raises(LaunchError) as err:
        pick_instance(2, "trn1.32xlarge")
    assert str(err.value) == words
    clean_env.setenv(env.INSTANCE_TYPE, "trn1.32xlarge")
    with pytest.raises(env.NeuronEnvironmentError) as err:
        discover()
    assert str(err.value) == words
    with pytest.raises(neuron_hardware.HardwareChoiceError, match=r"^lnc=True is not supported on trn2; use 1 or 2\.$"):
        neuron_hardware.logical_core_view("trn2.3xlarge", True)


def _bad(label: str, value: str) -> str:
    sep = " " if label.startswith("--") else "="
    return f"{label}{sep}{value} is not a known instance type; use one of: {KNOWN}."


def test_a_bad_instance_has_one_message_everywhere(clean_env, capsys):
    """The same words, naming where the value came from, from each layer (the device's first use and
    the planner's command line each in a fresh process, started together)."""
    fresh = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    device = subprocess.Popen(
        [sys.executable, "-c", "import torch\ntry:\n    torch.ones(1, device='neuron')\nexcept RuntimeError as e:\n"
         "    print(type(e).__name__, e)"],
        env={**fresh, env.INSTANCE_TYPE: "trn9.bogus"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    planner = subprocess.Popen(
        [sys.executable, "-m", "torch_neuronx.plan", "train", "--config", os.path.join(ROOT, "examples", "configs", "qwen3-8b"),
         "--instance", "trn9.bogus"], env=fresh, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        import torch_neuronx

        with pytest.raises(ValueError) as err:          # the cost model, by argument
            torch_neuronx.estimate(instance="trn9.bogus")
        assert str(err.value) == _bad("instance", "'trn9.bogus'")
        with pytest.raises(ValueError) as err:
            hardware("trn9.bogus")
        assert str(err.value) == _bad("instance_type", "'trn9.bogus'")
        with pytest.raises(LayoutError) as err:         # the planner's layout, by flag
            make_layout("trn9.bogus")
        assert str(err.value) == _bad("--instance", "'trn9.bogus'")
        with pytest.raises(LaunchError) as err:         # the rank launcher
            pick_instance(2, "trn9.bogus")
        assert str(err.value) == _bad("--instance", "'trn9.bogus'")

        clean_env.setenv(env.INSTANCE_TYPE, "trn9.bogus")  # by variable: runtime, cost model, tools
        by_variable = _bad(env.INSTANCE_TYPE, "'trn9.bogus'")
        for use in (discover, instance_view, hardware, torch_neuronx.estimate):
            with pytest.raises(env.NeuronEnvironmentError) as err:
                use()
            assert str(err.value) == by_variable, use
        assert ls.main([]) == 1
        assert capsys.readouterr().err == f"neuron-ls: {by_variable}\n"

        out, errors = device.communicate(timeout=240)
        assert out.strip() == f"NeuronEnvironmentError {by_variable}", errors[-2000:]
        out, errors = planner.communicate(timeout=240)
        assert planner.returncode == 2, errors[-2000:]
        assert f"python -m torch_neuronx.plan train: error: {_bad('--instance', repr('trn9.bogus'))}" in errors
    finally:
        for p in (device, planner):
            if p.poll() is None:
                p.kill()
                p.communicate()


def test_a_bad_lnc_has_one_message_everywhere(clean_env, capsys):
    words = "{} is not supported on trn1; use 1."
    import torch_neuronx

    with pytest.raises(ValueError) as err:
        torch_neuronx.estimate(instance="trn1.32xlarge", lnc=2)
    assert str(err.value) == words.format("lnc=2")
    with pytest.raises(LayoutError) as err:
        make_layout("trn1.32xlarge", 2)
    assert str(err.value) == words.format("--lnc 2")
    with pytest.raises(LaunchError) as err:
        pick_instance(2, "trn1.32xlarge", 2)
    assert str(err.value) == words.format("--lnc 2")
    clean_env.setenv(env.INSTANCE_TYPE, "trn1.32xlarge")
    clean_env.setenv(env.LOGICAL_NC_CONFIG, "2")
    for use in (discover, instance_view, hardware, torch_neuronx.estimate):
        with pytest.raises(env.NeuronEnvironmentError) as err:
            use()
        assert str(err.value) == words.format("NEURON_LOGICAL_NC_CONFIG=2"), use
    assert ls.main([]) == 1
    assert capsys.readouterr().err == f"neuron-ls: {words.format('NEURON_LOGICAL_NC_CONFIG=2')}\n"
