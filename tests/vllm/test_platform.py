"""The neuron platform plugin: chosen with no flag, sized from the core's memory, and refusing what it
cannot run at start-up with the argument named."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from .conftest import greedy

pytestmark = pytest.mark.vllm


def _platform_in_fresh_process(env: dict[str, str]) -> str:
    code = "from vllm.platforms import current_platform as p; print('PLATFORM', type(p).__name__, p.device_type)"
    run = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return next(line for line in run.stdout.splitlines() if line.startswith("PLATFORM "))


def test_plugin_is_chosen_with_no_flag_and_vllm_plugins_chooses_otherwise():
    assert _platform_in_fresh_process({}) == "PLATFORM NeuronPlatform neuron"
    assert _platform_in_fresh_process({"VLLM_PLUGINS": "none"}) == "PLATFORM CpuPlatform cpu"


def test_kv_cache_is_the_memory_utilization_share_of_the_core(model_dir, make_llm):
    llm = make_llm(model_dir("llama"), dtype="bfloat16", gpu_memory_utilization=0.05)
    config = llm.llm_engine.vllm_config
    hf = config.model_config.hf_config
    block_bytes = (config.cache_config.block_size * hf.num_hidden_layers * 2 * hf.num_key_value_heads
                   * hf.head_dim * torch.bfloat16.itemsize)
    share = 0.05 * torch.neuron.mem_get_info(0)[1]
    kv_bytes = config.cache_config.num_gpu_blocks * block_bytes
    # all of the share but the tiny model's weights and activations (a few MiB) and one block of rounding
    assert share - 16 * 2**20 <= kv_bytes <= share
    assert len(llm.generate(["Hello"], greedy(2))[0].outputs[0].token_ids) == 2


@pytest.mark.parametrize("option, named", [
    (dict(enable_lora=True), "LoRA"),
    (dict(quantization="fp8"), "quantisation"),
    (dict(speculative_config={"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 2}),
     "speculative decoding"),
])
def test_unsupported_feature_fails_at_start_up_naming_it(model_dir, make_llm, option, named):
    with pytest.raises(ValueError, match=f"vLLM on neuron does not support {named}"):
        make_llm(model_dir("llama"), dtype="bfloat16", **option)


def test_tensor_parallel_larger_than_the_instance_names_the_argument(model_dir, make_llm):
    cores = torch.neuron.device_count()
    heads = 4 * cores  # divisible by the tensor-parallel size asked for, so only the core count is wrong
    path = model_dir("llama", num_attention_heads=heads, num_key_value_heads=2 * cores)
    with pytest.raises(ValueError, match=f"--tensor-parallel-size {2 * cores} .* this instance has {cores}"):
        make_llm(path, dtype="bfloat16", tensor_parallel_size=2 * cores)


def test_tensor_parallel_not_dividing_the_heads_names_it(model_dir, make_llm):
    with pytest.raises(ValueError, match="attention heads .* must be divisible by tensor parallel size"):
        make_llm(model_dir("llama"), dtype="bfloat16", tensor_parallel_size=3)


def test_max_model_len_whose_kv_cache_does_not_fit_names_it(model_dir, make_llm, tmp_path):
    # a context of 4M tokens needs 2 GiB of KV cache for this model (512 bytes a token); 0.05 of the core leaves ~1.1 GiB
    path = model_dir("llama")
    config = json.load(open(os.path.join(path, "config.json")))
    long = tmp_path / "long"
    long.mkdir()
    for name in os.listdir(path):
        os.symlink(os.path.join(path, name), long / name)
    os.remove(long / "config.json")
    (long / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 2**22}))
    with pytest.raises(ValueError, match="max_model_len"):
        make_llm(str(long), dtype="bfloat16", max_model_len=2**22, max_num_batched_tokens=512)


def test_unknown_model_type_names_it(tmp_path, make_llm):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "no-such-model", "architectures": ["NoSuchForCausalLM"]}))
    with pytest.raises(Exception, match="no-such-model|NoSuchForCausalLM"):
        make_llm(str(tmp_path))


def test_cli_entry_keeps_vllm_cpu_platform_detection():
    """`python -m torch_neuronx.integrations.vllm` answers vLLM's look-up of the `vllm` distribution; with
    VLLM_PLUGINS=none vLLM must still find its CPU platform (detected by the "+cpu" label)."""
    code = ("import sys; from torch_neuronx.integrations.vllm import cli; "
            "sys.argv = ['vllm', '--version']; "
            "import importlib.metadata as m; from torch_neuronx._wrap import wrap_once; "
            "wrap_once(m, 'version', cli._version_with_builds); print('VERSION', m.version('vllm')); "
            "from vllm.platforms import current_platform as p; print('PLATFORM', type(p).__name__)")
    run = subprocess.run([sys.executable, "-c", code], env={**os.environ, "VLLM_PLUGINS": "none"},
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "VERSION 0.32.0+cpu" in run.stdout and "PLATFORM CpuPlatform" in run.stdout
