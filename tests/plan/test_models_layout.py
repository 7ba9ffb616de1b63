"""Layouts and configs that cannot work stop with a message naming the fix (no device needed)."""
from __future__ import annotations

import json

import pytest

from torch_neuronx.plan.__main__ import main as plan_main
from torch_neuronx.plan.models._load_config import ConfigError, load_config
from torch_neuronx.plan.models._layout import LayoutError, check_batch, check_model, make_layout


def test_cores_per_instance_and_dp_fill():
    assert make_layout("trn2.48xlarge", 2).world_size == 64          # 16 chips x 8 cores / LNC 2
    assert make_layout("trn2.48xlarge", 1).world_size == 128
    big = make_layout("trn1.32xlarge", 1, nodes=32, tp=32)
    assert (big.world_size, big.dp) == (1024, 32)                   # DP fills the cores left
    assert make_layout("trn2.48xlarge", 2, tp=4, fsdp=8).dp == 2


def test_bad_layouts_say_why():
    with pytest.raises(LayoutError, match="unknown|not a known instance type.*trn2.48xlarge"):
        make_layout("trn9.48xlarge")
    with pytest.raises(LayoutError, match=r"--lnc 3 .* use 1 or 2"):
        make_layout("trn2.48xlarge", 3)
    with pytest.raises(LayoutError, match=r"= 48 ranks, but .* 64 NeuronCores.*--dp 4"):
        make_layout("trn2.48xlarge", 2, tp=8, fsdp=2, dp=3)
    with pytest.raises(LayoutError, match=r"does not divide the 64 NeuronCores"):
        make_layout("trn2.48xlarge", 2, tp=3)
    with pytest.raises(LayoutError, match=r"--pp-schedule 'zb' is not a pipeline schedule; use one of: gpipe, 1f1b"):
        make_layout("trn2.48xlarge", 2, tp=8, pp=2, pp_schedule="zb")
    with pytest.raises(LayoutError, match=r"interleaved needs --pp-chunks >= 2"):
        make_layout("trn2.48xlarge", 2, tp=8, pp=2, pp_schedule="interleaved", pp_chunks=1)
    with pytest.raises(LayoutError, match=r"--pp-chunks 2 needs --pp-schedule interleaved"):
        make_layout("trn2.48xlarge", 2, tp=8, pp=2, pp_chunks=2)
    with pytest.raises(LayoutError, match=r"--ep 3 must be a multiple of --tp 2"):
        make_layout("trn2.48xlarge", 2, tp=2, fsdp=4, ep=3)
    layout = make_layout("trn2.48xlarge", 2, tp=8, pp=8)          # pipeline outermost, DP fills the rest
    assert (layout.pp, layout.dp, layout.pp_schedule, layout.pp_chunks) == (8, 1, "1f1b", 1)
    assert check_batch(layout, 1, None) == (16, 16)                # 2 x PP micro-batches in flight by default


def test_tp_must_divide_heads_and_split_or_replicate_kv_heads(tiny_config_dir):
    from transformers import Qwen3Config

    from tests.plan.conftest import TINY
    from torch_neuronx.plan.models._layout import kv_replication

    config = load_config(tiny_config_dir)           # 4 heads, 2 KV heads
    check_model(make_layout("trn2.3xlarge", 2, tp=2), config)
    check_model(make_layout("trn2.3xlarge", 2, tp=4), config)     # KV heads replicated: one per rank
    assert (kv_replication(2, config), kv_replication(4, config)) == (1, 2)
    with pytest.raises(LayoutError, match=r"--tp 8 does not divide the model's num_attention_heads=4.*\[1, 2, 4\]"):
        check_model(make_layout("trn2.3xlarge", 1, tp=8), config)
    odd = Qwen3Config(**{**TINY, "num_attention_heads": 12, "num_key_value_heads": 4, "intermediate_size": 120,
                         "vocab_size": 240})
    with pytest.raises(LayoutError, match=r"--tp 6 and the model's num_key_value_heads=4 do not divide each other"):
        check_model(make_layout("trn2.48xlarge", 2, tp=6, dp=None, fsdp=1, nodes=3), odd)
    with pytest.raises(LayoutError, match=r"--pp 4 with 1 chunks per stage needs at least 4 layers.*=2"):
        check_model(make_layout("trn2.3xlarge", 2, pp=4), config)
    with pytest.raises(LayoutError, match=r"--ep 2: the model has no experts"):
        check_model(make_layout("trn2.3xlarge", 2, fsdp=2, ep=2), config)


def test_global_batch_and_accumulation():
    layout = make_layout("trn2.48xlarge", 2, tp=8, fsdp=4)         # DP 2 -> 8 data-parallel ranks
    assert check_batch(layout, 2, None) == (16, 1)                 # default: micro x DP ranks
    assert check_batch(layout, 2, 128) == (128, 8)                 # accum = global / (micro x dp)
    with pytest.raises(LayoutError, match="--global-batch 100 is not a multiple .* 16"):
        check_batch(layout, 2, 100)


def test_config_transformers_cannot_build(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "no-such-model", "hidden_size": 8}))
    with pytest.raises(ConfigError, match="transformers cannot build this config"):
        load_config(str(tmp_path))
    with pytest.raises(ConfigError, match="no config file there.*any name"):
        load_config(str(tmp_path / "missing"))


def test_config_file_of_any_name(tmp_path, tiny_config_dir):
    import shutil

    renamed = tmp_path / "llama.json"
    shutil.copy(f"{tiny_config_dir}/config.json", renamed)
    config = load_config(str(renamed))
    assert config.model_type == "qwen3" and config.num_key_value_heads == 2
    assert load_config(f"{tiny_config_dir}/config.json").to_dict() == load_config(tiny_config_dir).to_dict()


def test_command_lines_stop_before_running(tiny_config_dir, plan_env, capsys, tmp_path):
    from transformers import Qwen3Config

    from tests.plan.conftest import TINY

    Qwen3Config(**{**TINY, "num_attention_heads": 6, "num_key_value_heads": 3}).save_pretrained(tmp_path)
    with pytest.raises(SystemExit) as stop:
        plan_main(["train", "--config", tiny_config_dir, "--instance", "trn2.48xlarge", "--tp", "5", "--real"])
    assert stop.value.code == 2 and "5 x 1 x 1 = 5 does not divide the 64" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        plan_main(["generate", "--config", str(tmp_path), "--instance", "trn2.3xlarge", "--tp", "2", "--real"])
    assert stop.value.code == 2 and "--tp 2 and the model's num_key_value_heads=3" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        plan_main(["train", "--config", tiny_config_dir, "--instance", "nope.xlarge"])
    assert "nope.xlarge" in capsys.readouterr().err
