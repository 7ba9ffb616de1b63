"""A full-size Qwen-Image-2.1 pipeline folder built from configs alone, for a dry run of qwen_image_tp.py.

    python examples/qwen_image_config_only.py /tmp/qwen-image-2.1          # configs from examples/configs/
    python -m torch_neuronx.plan run --nproc-per-node 8 --instance trn2.48xlarge -- \\
        examples/qwen_image_tp.py --model /tmp/qwen-image-2.1 --config-only --compile --dtype bfloat16 \\
        --size 1024 --steps 40

Each component is built by diffusers' own `from_config` on the meta device from the configs in
`examples/configs/qwen-image-2.1/` (public dimensions: the transformer's, the VAE's and the
scheduler's), its config is saved with `save_config`, and its weights file is a *weightless*
safetensors checkpoint (`torch_neuronx.plan.zero_checkpoint`: the real header, the data a
sparse-file hole, so no disk space and every weight reads as zero). `model_index.json` comes from
the pipeline's own `save_config`. The example then loads the folder through the real
`from_pretrained(..., parallel_config=TensorParallelConfig(...))`, which reads each rank's slices.

No text encoder and no processor are written: the example passes prompt embeddings computed on the
CPU (`--config-only` passes a text-only processor stand-in, as `--tiny` does; Qwen3VLProcessor
needs torchvision and the tokenizer files).
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
CONFIGS = os.path.join(HERE, "configs", "qwen-image-2.1")
WEIGHTS = "diffusion_pytorch_model.safetensors"


def build(out: str, configs: str = CONFIGS, dtype: torch.dtype = torch.bfloat16) -> str:
    from diffusers import (AutoencoderKLQwenImage21, FlowMatchEulerDiscreteScheduler, QwenImage21Pipeline,
                           QwenImage21Transformer2DModel)

    from torch_neuronx.compat.diffusers.tiny_qwenimage21 import TextOnlyProcessor
    from torch_neuronx.plan import zero_checkpoint

    models = {}
    for name, cls in (("transformer", QwenImage21Transformer2DModel), ("vae", AutoencoderKLQwenImage21)):
        config_dir = os.path.join(configs, name)
        if not os.path.isfile(os.path.join(config_dir, "config.json")):
            raise FileNotFoundError(f"qwen_image_config_only: {config_dir}/config.json is missing; pass "
                                    f"--configs a folder with transformer/, vae/ and scheduler/ configs")
        with torch.device("meta"):   # no memory behind the parameters: only their names and shapes
            model = cls.from_config(cls.load_config(config_dir))
        os.makedirs(os.path.join(out, name), exist_ok=True)
        model.save_config(os.path.join(out, name))
        zero_checkpoint.write(model, os.path.join(out, name, WEIGHTS), dtype=dtype)
        models[name] = model
    scheduler = FlowMatchEulerDiscreteScheduler.from_config(
        FlowMatchEulerDiscreteScheduler.load_config(os.path.join(configs, "scheduler")))
    scheduler.save_pretrained(os.path.join(out, "scheduler"))
    pipe = QwenImage21Pipeline(scheduler=scheduler, vae=models["vae"], text_encoder=None,
                               processor=TextOnlyProcessor(), transformer=models["transformer"])
    pipe.register_to_config(processor=(None, None))   # the stand-in is not saved (as save_pretrained skips it)
    pipe.save_config(out)   # model_index.json: the components' libraries and classes
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", help="the pipeline folder to write")
    p.add_argument("--configs", default=CONFIGS, help="folder with transformer/, vae/, scheduler/ configs")
    p.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16", help="weights' dtype")
    args = p.parse_args()
    build(args.out, args.configs, getattr(torch, args.dtype))
    print(f"wrote {args.out} (weightless checkpoints: no disk space behind the weights)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
