"""Weightless checkpoints: real safetensors files with no bytes behind the weights, read by the real loaders."""
from __future__ import annotations

import importlib.util
import os

import pytest
import torch

from torch_neuronx.plan import zero_checkpoint

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_header_shapes_dtypes_and_no_disk_space(tmp_path):
    from safetensors.torch import load_file

    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(300, 700), torch.nn.LayerNorm(700))
    model.register_buffer("steps", torch.zeros(3, dtype=torch.int64, device="meta"))
    path = str(tmp_path / "w.safetensors")
    size = zero_checkpoint.write(model, path, dtype=torch.bfloat16)
    assert os.path.getsize(path) == size > 300 * 700 * 2
    assert os.stat(path).st_blocks * 512 < 64 * 1024   # the data is a hole: only the header is stored
    loaded = load_file(path)
    for name, ref in model.state_dict().items():
        t = loaded[name]
        assert t.shape == ref.shape and not t.any()
        assert t.dtype == (torch.bfloat16 if ref.is_floating_point() else ref.dtype)


def test_bad_input_names_the_argument(tmp_path):
    with pytest.raises(TypeError, match="nn.Module or a dict"):
        zero_checkpoint.write([torch.zeros(2)], str(tmp_path / "x.safetensors"))
    with pytest.raises(ValueError, match="'c'.*complex"):
        zero_checkpoint.write({"c": torch.zeros(2, dtype=torch.complex64)}, str(tmp_path / "x.safetensors"))
    assert not os.path.exists(tmp_path / "x.safetensors")


def test_config_only_qwen_image_folder_loads_through_from_pretrained(tmp_path):
    """examples/qwen_image_config_only.py with tiny configs: diffusers' own from_pretrained reads it."""
    from diffusers import AutoencoderKLQwenImage21, FlowMatchEulerDiscreteScheduler, QwenImage21Transformer2DModel

    from torch_neuronx.compat.diffusers import tiny_qwenimage21 as tiny

    configs = tmp_path / "configs"
    with torch.device("meta"):
        QwenImage21Transformer2DModel(patch_size=1, in_channels=16, out_channels=16, num_layers=1,
                                      attention_head_dim=16, num_attention_heads=2, context_in_dim=32,
                                      mlp_ratio=2, axes_dims_rope=(4, 6, 6)).save_config(configs / "transformer")
        AutoencoderKLQwenImage21(base_dim=8, decoder_base_dim=8, z_dim=16, dim_mult=[1, 1, 1, 1, 1],
                                 num_res_blocks=1, latents_mean=[0.0] * 16, latents_std=[1.0] * 16
                                 ).save_config(configs / "vae")
    FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True).save_config(configs / "scheduler")
    spec = importlib.util.spec_from_file_location("qi_config_only",
                                                  os.path.join(REPO, "examples", "qwen_image_config_only.py"))
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    out = builder.build(str(tmp_path / "pipe"), str(configs))

    pipe = tiny.load(out, dtype=torch.bfloat16)
    assert type(pipe.transformer).__name__ == "QwenImage21Transformer2DModel"
    assert pipe.transformer.config.num_layers == 1 and pipe.vae.config.z_dim == 16
    for module in (pipe.transformer, pipe.vae):
        for p in module.parameters():
            assert p.device.type == "cpu" and p.dtype == torch.bfloat16 and not p.any()
