"""Tiny, offline configurations of popular diffusers pipelines.

Each spec builds the pipeline's components from configs with random weights (seeded), and gives the call
arguments: prompt embeddings of the right shapes stand in for the text encoders (which are None), guidance
is off (`guidance_scale=1.0`) so no negative embeddings are needed, and resolutions are tiny. Image-to-image
specs reuse their text-to-image components and add an input image.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

TP_MODELS = ("qwenimage21", "qwenimage", "flux", "flux2")


@dataclass
class Spec:
    name: str
    pipeline: str                      # diffusers class name
    build: Callable[[], dict]          # components (None where absent)
    call: Callable[[], dict]           # call kwargs (CPU tensors; moved by the runner)
    kind: str = "text-to-image"
    tp_plan: bool = False
    load_extra: Callable[[], dict] = field(default=lambda: {})   # components passed to from_pretrained


def _g(seed=0):
    return torch.Generator("cpu").manual_seed(seed)


def _randn(*shape, seed=1):
    return torch.randn(*shape, generator=_g(seed))


def _image(size=32):
    from PIL import Image
    import numpy as np

    rng = np.random.RandomState(0)
    return Image.fromarray(rng.randint(0, 255, (size, size, 3), dtype=np.uint8))


def _vae_kl(latent_channels=4, **kw):
    from diffusers import AutoencoderKL

    torch.manual_seed(0)
    return AutoencoderKL(block_out_channels=[8, 8], in_channels=3, out_channels=3, latent_channels=latent_channels,
                         down_block_types=["DownEncoderBlock2D"] * 2, up_block_types=["UpDecoderBlock2D"] * 2,
                         norm_num_groups=4, layers_per_block=1, sample_size=32, **kw)


# ---------------------------------------------------------------- UNet pipelines
def _sd_components():
    from diffusers import PNDMScheduler, UNet2DConditionModel

    torch.manual_seed(0)
    unet = UNet2DConditionModel(block_out_channels=(8, 16), layers_per_block=1, sample_size=16, in_channels=4,
                                out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=32,
                                norm_num_groups=4, attention_head_dim=4)
    return dict(unet=unet, vae=_vae_kl(), scheduler=PNDMScheduler(skip_prk_steps=True), text_encoder=None,
                tokenizer=None, safety_checker=None, feature_extractor=None, image_encoder=None,
                requires_safety_checker=False)


def _sd_call():
    return dict(prompt_embeds=_randn(1, 7, 32), guidance_scale=1.0)


def _sdxl_components():
    from diffusers import EulerDiscreteScheduler, UNet2DConditionModel

    torch.manual_seed(0)
    unet = UNet2DConditionModel(block_out_channels=(8, 16), layers_per_block=1, sample_size=16, in_channels=4,
                                out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=64,
                                norm_num_groups=4, attention_head_dim=4, addition_embed_type="text_time",
                                addition_time_embed_dim=8, projection_class_embeddings_input_dim=6 * 8 + 32,
                                transformer_layers_per_block=1)
    return dict(unet=unet, vae=_vae_kl(), scheduler=EulerDiscreteScheduler(), text_encoder=None, tokenizer=None,
                text_encoder_2=None, tokenizer_2=None, image_encoder=None, feature_extractor=None)


def _sdxl_call():
    return dict(prompt_embeds=_randn(1, 7, 64), pooled_prompt_embeds=_randn(1, 32, seed=2), guidance_scale=1.0)


# ---------------------------------------------------------------- DiT pipelines
def _sd3_components():
    from diffusers import FlowMatchEulerDiscreteScheduler, SD3Transformer2DModel

    torch.manual_seed(0)
    tr = SD3Transformer2DModel(sample_size=16, patch_size=1, in_channels=4, num_layers=2, attention_head_dim=8,
                               num_attention_heads=4, caption_projection_dim=32, joint_attention_dim=32,
                               pooled_projection_dim=64, out_channels=4)
    return dict(transformer=tr, vae=_vae_kl(shift_factor=0.0609, scaling_factor=1.5035, use_quant_conv=False,
                                            use_post_quant_conv=False),
                scheduler=FlowMatchEulerDiscreteScheduler(), text_encoder=None, tokenizer=None, text_encoder_2=None,
                tokenizer_2=None, text_encoder_3=None, tokenizer_3=None, image_encoder=None, feature_extractor=None)


def _sd3_call():
    return dict(prompt_embeds=_randn(1, 7, 32), pooled_prompt_embeds=_randn(1, 64, seed=2), guidance_scale=1.0)


def _flux_components():
    from diffusers import FlowMatchEulerDiscreteScheduler, FluxTransformer2DModel

    torch.manual_seed(0)
    tr = FluxTransformer2DModel(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                                attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                                pooled_projection_dim=32, axes_dims_rope=[4, 4, 8])
    return dict(transformer=tr, vae=_vae_kl(shift_factor=0.0609, scaling_factor=1.5035, use_quant_conv=False,
                                            use_post_quant_conv=False),
                scheduler=FlowMatchEulerDiscreteScheduler(), text_encoder=None, tokenizer=None, text_encoder_2=None,
                tokenizer_2=None, image_encoder=None, feature_extractor=None)


def _flux_call():
    return dict(prompt_embeds=_randn(1, 7, 32), pooled_prompt_embeds=_randn(1, 32, seed=2))


def _flux2_components():
    from diffusers import AutoencoderKLFlux2, FlowMatchEulerDiscreteScheduler, Flux2Transformer2DModel

    torch.manual_seed(0)
    tr = Flux2Transformer2DModel(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                                 attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                                 timestep_guidance_channels=32, axes_dims_rope=(4, 4, 4, 4))
    torch.manual_seed(0)
    vae = AutoencoderKLFlux2(block_out_channels=(8, 8), down_block_types=("DownEncoderBlock2D",) * 2,
                             up_block_types=("UpDecoderBlock2D",) * 2, layers_per_block=1, latent_channels=4,
                             norm_num_groups=4, sample_size=32, use_quant_conv=False, use_post_quant_conv=False)
    return dict(transformer=tr, vae=vae, scheduler=FlowMatchEulerDiscreteScheduler(), text_encoder=None,
                tokenizer=None)


def _flux2_call():
    return dict(prompt_embeds=_randn(1, 7, 32))


def _qwenimage_components():
    from diffusers import AutoencoderKLQwenImage, FlowMatchEulerDiscreteScheduler, QwenImageTransformer2DModel

    torch.manual_seed(0)
    tr = QwenImageTransformer2DModel(patch_size=2, in_channels=16, out_channels=4, num_layers=2,
                                     attention_head_dim=16, num_attention_heads=4, joint_attention_dim=16,
                                     guidance_embeds=False, axes_dims_rope=(8, 4, 4))
    torch.manual_seed(0)
    vae = AutoencoderKLQwenImage(base_dim=24, z_dim=4, dim_mult=[1, 2, 4], num_res_blocks=1,
                                 temperal_downsample=[False, True], latents_mean=[0.0] * 4, latents_std=[1.0] * 4)
    return dict(transformer=tr, vae=vae, scheduler=FlowMatchEulerDiscreteScheduler(), text_encoder=None,
                tokenizer=None)


def _qwenimage_call():
    return dict(prompt_embeds=_randn(1, 7, 16), prompt_embeds_mask=torch.ones(1, 7, dtype=torch.long))


def _qwenimage21_components():
    from . import tiny_qwenimage21 as t

    from diffusers import (AutoencoderKLQwenImage21, FlowMatchEulerDiscreteScheduler,
                           QwenImage21Transformer2DModel)

    torch.manual_seed(0)
    tr = QwenImage21Transformer2DModel(patch_size=1, in_channels=16, out_channels=16, num_layers=2,
                                       attention_head_dim=16, num_attention_heads=t.HEADS,
                                       context_in_dim=t.CONTEXT_DIM, mlp_ratio=2, axes_dims_rope=(4, 6, 6))
    vae = AutoencoderKLQwenImage21(base_dim=8, decoder_base_dim=8, z_dim=16, dim_mult=[1] * 5, num_res_blocks=1,
                                   latents_mean=[0.0] * 16, latents_std=[1.0] * 16, in_channels=4, out_channels=4)
    sched = FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15,
                                            base_image_seq_len=256, max_image_seq_len=4096, shift_terminal=0.02)
    return dict(transformer=tr, vae=vae, scheduler=sched, text_encoder=None, processor=t.TextOnlyProcessor())


def _qwenimage21_call():
    from . import tiny_qwenimage21 as t

    return dict(prompt_embeds=t.prompt_embeds(), height=64, width=64)


def _pixart_components():
    from diffusers import DPMSolverMultistepScheduler, PixArtTransformer2DModel

    torch.manual_seed(0)
    tr = PixArtTransformer2DModel(sample_size=16, num_layers=2, patch_size=2, attention_head_dim=8,
                                  num_attention_heads=3, caption_channels=32, in_channels=4, cross_attention_dim=24,
                                  out_channels=8, attention_bias=True, activation_fn="gelu-approximate",
                                  num_embeds_ada_norm=1000, norm_type="ada_norm_single",
                                  norm_elementwise_affine=False, norm_eps=1e-6)
    return dict(transformer=tr, vae=_vae_kl(), scheduler=DPMSolverMultistepScheduler(), text_encoder=None,
                tokenizer=None)


def _masked_call(dim, **extra):
    return lambda: dict(prompt_embeds=_randn(1, 7, dim), prompt_attention_mask=torch.ones(1, 7, dtype=torch.long),
                        guidance_scale=1.0, **extra)


def _sana_components():
    from diffusers import AutoencoderDC, FlowMatchEulerDiscreteScheduler, SanaTransformer2DModel

    torch.manual_seed(0)
    tr = SanaTransformer2DModel(patch_size=1, in_channels=4, out_channels=4, num_layers=2, num_attention_heads=2,
                                attention_head_dim=4, num_cross_attention_heads=2, cross_attention_head_dim=4,
                                cross_attention_dim=8, caption_channels=8, sample_size=32)
    torch.manual_seed(0)
    vae = AutoencoderDC(in_channels=3, latent_channels=4, attention_head_dim=2,
                        encoder_block_types=("ResBlock", "EfficientViTBlock"),
                        decoder_block_types=("ResBlock", "EfficientViTBlock"),
                        encoder_block_out_channels=(8, 8), decoder_block_out_channels=(8, 8),
                        encoder_qkv_multiscales=((), (5,)), decoder_qkv_multiscales=((), (5,)),
                        encoder_layers_per_block=(1, 1), decoder_layers_per_block=[1, 1],
                        downsample_block_type="conv", upsample_block_type="interpolate",
                        decoder_norm_types="rms_norm", decoder_act_fns="silu", scaling_factor=0.41407)
    return dict(transformer=tr, vae=vae, scheduler=FlowMatchEulerDiscreteScheduler(shift=7.0), text_encoder=None,
                tokenizer=None)


def _auraflow_components():
    from diffusers import AuraFlowTransformer2DModel, FlowMatchEulerDiscreteScheduler

    torch.manual_seed(0)
    tr = AuraFlowTransformer2DModel(sample_size=16, patch_size=2, in_channels=4, num_mmdit_layers=1,
                                    num_single_dit_layers=1, attention_head_dim=8, num_attention_heads=4,
                                    caption_projection_dim=32, joint_attention_dim=32, out_channels=4,
                                    pos_embed_max_size=256)
    return dict(transformer=tr, vae=_vae_kl(), scheduler=FlowMatchEulerDiscreteScheduler(), text_encoder=None,
                tokenizer=None)


def _lumina2_components():
    from diffusers import FlowMatchEulerDiscreteScheduler, Lumina2Transformer2DModel

    torch.manual_seed(0)
    tr = Lumina2Transformer2DModel(sample_size=16, patch_size=2, in_channels=4, hidden_size=24, num_layers=2,
                                   num_refiner_layers=1, num_attention_heads=3, num_kv_heads=1, multiple_of=16,
                                   ffn_dim_multiplier=None, norm_eps=1e-5, scaling_factor=1.0,
                                   axes_dim_rope=(4, 2, 2), axes_lens=(128, 128, 128), cap_feat_dim=8)
    return dict(transformer=tr, vae=_vae_kl(shift_factor=0.0609, scaling_factor=1.5035),
                scheduler=FlowMatchEulerDiscreteScheduler(), text_encoder=None, tokenizer=None)


def _cogview4_components():
    from diffusers import CogView4Transformer2DModel, FlowMatchEulerDiscreteScheduler

    torch.manual_seed(0)
    tr = CogView4Transformer2DModel(patch_size=2, in_channels=4, num_layers=2, attention_head_dim=4,
                                    num_attention_heads=4, out_channels=4, text_embed_dim=32, time_embed_dim=8,
                                    condition_dim=4)
    sched = FlowMatchEulerDiscreteScheduler(base_shift=0.25, max_shift=0.75, base_image_seq_len=256,
                                            use_dynamic_shifting=True, time_shift_type="linear")
    return dict(transformer=tr, vae=_vae_kl(), scheduler=sched, text_encoder=None, tokenizer=None)


def _chroma_components():
    from diffusers import ChromaTransformer2DModel, FlowMatchEulerDiscreteScheduler

    torch.manual_seed(0)
    tr = ChromaTransformer2DModel(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                                  attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                                  axes_dims_rope=[4, 4, 8], approximator_num_channels=8, approximator_hidden_dim=32,
                                  approximator_layers=1)
    return dict(transformer=tr, vae=_vae_kl(shift_factor=0.0609, scaling_factor=1.5035, use_quant_conv=False,
                                            use_post_quant_conv=False),
                scheduler=FlowMatchEulerDiscreteScheduler(), text_encoder=None, tokenizer=None, image_encoder=None,
                feature_extractor=None)


def _chroma_call():
    return dict(prompt_embeds=_randn(1, 7, 32), prompt_attention_mask=torch.ones(1, 7, dtype=torch.bool),
                guidance_scale=1.0)


def _i2i(call, **extra):
    return lambda: dict(call(), image=_image(), strength=0.8, **extra)


def _inpaint(call):
    from PIL import Image

    def make():
        mask = Image.new("L", (32, 32), 0)
        mask.paste(255, (8, 8, 24, 24))
        return dict(call(), image=_image(), mask_image=mask, strength=0.8)
    return make


SPECS: list[Spec] = [
    # the four models with a tensor-parallel plan
    Spec("qwenimage21", "QwenImage21Pipeline", _qwenimage21_components, _qwenimage21_call, tp_plan=True,
         load_extra=lambda: {"processor": __import__(
             "torch_neuronx.compat.diffusers.tiny_qwenimage21", fromlist=["x"]).TextOnlyProcessor()}),
    Spec("qwenimage", "QwenImagePipeline", _qwenimage_components, _qwenimage_call, tp_plan=True),
    Spec("flux", "FluxPipeline", _flux_components, _flux_call, tp_plan=True),
    Spec("flux2", "Flux2Pipeline", _flux2_components, _flux2_call, tp_plan=True),
    # text-to-image
    Spec("sd", "StableDiffusionPipeline", _sd_components, _sd_call),
    Spec("sdxl", "StableDiffusionXLPipeline", _sdxl_components, _sdxl_call),
    Spec("sd3", "StableDiffusion3Pipeline", _sd3_components, _sd3_call),
    Spec("pixart_sigma", "PixArtSigmaPipeline", _pixart_components,
         _masked_call(32, use_resolution_binning=False)),
    Spec("pixart_alpha", "PixArtAlphaPipeline", _pixart_components,
         _masked_call(32, use_resolution_binning=False)),
    Spec("sana", "SanaPipeline", _sana_components, _masked_call(8, use_resolution_binning=False)),
    Spec("auraflow", "AuraFlowPipeline", _auraflow_components,
         lambda: dict(prompt_embeds=_randn(1, 7, 32), prompt_attention_mask=torch.ones(1, 7, dtype=torch.long),
                      guidance_scale=1.0)),
    Spec("lumina2", "Lumina2Pipeline", _lumina2_components, _masked_call(8)),
    Spec("cogview4", "CogView4Pipeline", _cogview4_components,
         lambda: dict(prompt_embeds=_randn(1, 16, 32), guidance_scale=1.0)),
    Spec("chroma", "ChromaPipeline", _chroma_components, _chroma_call),
    # image-to-image and inpainting
    Spec("sd_img2img", "StableDiffusionImg2ImgPipeline", _sd_components, _i2i(_sd_call), kind="image-to-image"),
    Spec("sd_inpaint", "StableDiffusionInpaintPipeline", _sd_components, _inpaint(_sd_call), kind="inpainting"),
    Spec("sdxl_img2img", "StableDiffusionXLImg2ImgPipeline", _sdxl_components,
         _i2i(_sdxl_call, aesthetic_score=6.0), kind="image-to-image"),
    Spec("sd3_img2img", "StableDiffusion3Img2ImgPipeline", _sd3_components, _i2i(_sd3_call), kind="image-to-image"),
    Spec("flux_img2img", "FluxImg2ImgPipeline", _flux_components, _i2i(_flux_call), kind="image-to-image"),
    Spec("qwenimage_img2img", "QwenImageImg2ImgPipeline", _qwenimage_components, _i2i(_qwenimage_call),
         kind="image-to-image"),
    Spec("chroma_img2img", "ChromaImg2ImgPipeline", _chroma_components, _i2i(_chroma_call), kind="image-to-image"),
]

BY_NAME = {s.name: s for s in SPECS}
