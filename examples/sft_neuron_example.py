"""Supervised fine-tuning with TRL's SFTTrainer on neuron, single process or TP x FSDP under torchrun.

The script is the ordinary TRL recipe; the only neuron-specific settings are the few below. Nothing imports
torch_neuronx: `import torch` loads the device, and transformers/accelerate/TRL detect it themselves
(bf16 without --use_cpu, pad to a multiple of 128, torch.compile backend "neuron" with dynamic=False,
c10d backend "neuron" under torchrun).

    # connected machine, a Hub model and dataset
    python examples/sft_neuron_example.py --model_name_or_path Qwen/Qwen3-0.6B \
        --dataset_name HuggingFaceH4/ultrachat_200k --dataset_train_split train_sft \
        --packing true --packing_strategy wrapped --dtype bfloat16 --torch_compile true \
        --save_only_model true --gradient_accumulation_steps 8 --warmup_steps 0.03 --output_dir out

    # offline: build a tiny Qwen3-style model and a local `messages` dataset first, then the same script
    python examples/sft_neuron_example.py --tiny_local_assets /tmp/sft-assets --output_dir out \
        --max_length 128 --per_device_train_batch_size 2 --max_steps 8 --packing true \
        --packing_strategy wrapped --save_only_model true --report_to none

    # tensor parallel x fully sharded data parallel (TP_SIZE x FSDP_SIZE must equal the process count)
    TP_SIZE=2 FSDP_SIZE=2 torchrun --nproc_per_node 4 examples/sft_neuron_example.py ...same flags...

Besides the model, rank 0 writes `sft_summary.json` to --output_dir: per-step losses, the device and
distributed type the Trainer picked, TRL's pad_to_multiple_of, the compile backend and the neuron compile
metrics, and the peak device memory.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch

# Neuron compiles once per input shape: keep graphs static (the Trainer also passes dynamic=False).
torch._dynamo.config.automatic_dynamic_shapes = False


def _take_local_flags(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """`--tiny_local_assets DIR`: build the offline model + dataset and point the TRL flags at them."""
    pre = argparse.ArgumentParser(add_help=False, usage=argparse.SUPPRESS,
                                  description="This example's own options (TRL's follow):")
    pre.add_argument("--tiny_local_assets", default=None, metavar="DIR",
                     help="build a tiny Qwen3-style model and local dataset in DIR and train on them, offline")
    # a folder holding only a config.json (e.g. examples/configs/qwen3-8b): the model is built from it with
    # random weights, for a full-size dry run (python -m torch_neuronx.plan run); the tokenizer comes from
    # --model_name_or_path (--tiny_local_assets points it at the tiny one)
    pre.add_argument("--model_config_only", default=None, metavar="DIR",
                     help="a folder with only a config.json: the model is built from it with random weights")
    local, rest = pre.parse_known_args(argv)
    if "-h" in argv or "--help" in argv:   # TRL's parser prints its own options and exits
        pre.print_help()
    if local.tiny_local_assets:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from sft_tiny_assets import ensure_assets

        model_dir, data_dir = ensure_assets(local.tiny_local_assets)
        given = {a.split("=")[0] for a in rest if a.startswith("--")}
        for flag, value in (("--model_name_or_path", model_dir), ("--dataset_name", data_dir),
                            ("--dataset_train_split", "train_sft")):
            if flag not in given:
                rest += [flag, value]
    return local, rest


def _parallel_sizes() -> tuple[int, int]:
    """(TP_SIZE, FSDP_SIZE) from the environment; stops every rank at once when they do not fit the job."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    tp = int(os.environ.get("TP_SIZE", "1"))
    fsdp = int(os.environ.get("FSDP_SIZE", str(max(1, world // max(tp, 1)))))
    if world > 1 and (tp < 1 or fsdp < 1 or tp * fsdp != world):
        raise SystemExit(f"TP_SIZE x FSDP_SIZE = {tp} x {fsdp} = {tp * fsdp} does not match the {world} "
                         f"processes torchrun started: set TP_SIZE and FSDP_SIZE so that their product is "
                         f"--nproc_per_node x nnodes ({world}).")
    return tp, fsdp


def _distributed_config(model_name: str, trust_remote_code: bool):
    """DistributedConfig(tp_size=TP_SIZE, fsdp_size=FSDP_SIZE) under torchrun; None for one process."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return None
    from transformers import AutoConfig
    from transformers.distributed import DistributedConfig

    tp, fsdp = _parallel_sizes()
    if tp > 1:
        config = AutoConfig.from_pretrained(model_name, trust_remote_code=trust_remote_code)
        config = getattr(config, "text_config", config)
        for name in ("num_attention_heads", "num_key_value_heads", "intermediate_size", "vocab_size"):
            value = getattr(config, name, None)
            if isinstance(value, int) and value % tp:
                raise SystemExit(f"TP_SIZE={tp} does not divide the model's {name}={value}: choose a TP_SIZE "
                                 f"that divides it.")
    return DistributedConfig(tp_size=tp, fsdp_size=fsdp)


def _write_summary(trainer, training_args) -> None:
    if not trainer.accelerator.is_main_process:
        return
    device_module = getattr(torch, trainer.args.device.type, None)
    summary = {
        "losses": [e["loss"] for e in trainer.state.log_history if "loss" in e],
        "grad_norms": [e.get("grad_norm") for e in trainer.state.log_history if "loss" in e],
        "global_step": trainer.state.global_step,
        "device": str(trainer.args.device),
        "distributed_type": str(trainer.accelerator.distributed_type),
        "num_processes": trainer.accelerator.num_processes,
        "bf16": bool(training_args.bf16),
        "pad_to_multiple_of": training_args.pad_to_multiple_of,
        "torch_compile": bool(training_args.torch_compile),
        "torch_compile_backend": training_args.torch_compile_backend,
    }
    dynamo_plugin = getattr(trainer.accelerator.state, "dynamo_plugin", None)
    if training_args.torch_compile and dynamo_plugin is not None:
        summary["torch_compile_kwargs"] = {k: str(v) for k, v in dynamo_plugin.to_kwargs().items()}
    if trainer.args.device.type == "neuron":
        import torch_neuronx.compiler as neuron_compiler

        metrics = neuron_compiler.get_dynamo_metrics()
        summary["compile_metrics"] = {k: metrics[k] for k in ("graphs_compiled", "recompilations",
                                                              "graph_breaks", "fallbacks", "compile_time_s")}
    if device_module is not None and hasattr(device_module, "max_memory_allocated"):
        summary["max_memory_allocated"] = device_module.max_memory_allocated()
    with open(os.path.join(training_args.output_dir, "sft_summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


def _model_from_config(config_dir: str, model_init_kwargs: dict):
    """The causal LM of `config_dir`/config.json through the real from_pretrained path, with no weights read
    (`state_dict={}`: the model's own init fills them; shape-only in a dry run)."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    config = AutoConfig.from_pretrained(config_dir)
    kwargs = {k: v for k, v in model_init_kwargs.items() if k not in ("revision", "trust_remote_code")}
    if isinstance(kwargs.get("dtype"), str) and kwargs["dtype"] != "auto":
        kwargs["dtype"] = getattr(torch, kwargs["dtype"])
    if kwargs.get("device_map") is None and "distributed_config" not in kwargs:
        kwargs["device_map"] = "neuron" if hasattr(torch, "neuron") else None
    return MODEL_FOR_CAUSAL_LM_MAPPING[type(config)].from_pretrained(None, config=config, state_dict={}, **kwargs)


def main(script_args, training_args, model_args, model_config_only: str | None = None) -> None:
    import transformers
    from datasets import load_dataset
    from packaging.version import Version
    from trl import SFTTrainer, get_peft_config

    model_init_kwargs = dict(
        revision=model_args.model_revision,
        trust_remote_code=training_args.trust_remote_code,
        attn_implementation=model_args.attn_implementation,
        dtype=model_args.dtype,
        device_map=None,
    )
    distributed_config = _distributed_config(model_config_only or model_args.model_name_or_path,
                                             training_args.trust_remote_code)
    if distributed_config is not None:
        # transformers shards the weights as they load; the Trainer sees an already distributed model
        model_init_kwargs["distributed_config"] = distributed_config
    if training_args.model_init_kwargs is not None:
        model_init_kwargs.update(training_args.model_init_kwargs)
    model, processing_class = model_args.model_name_or_path, None
    if model_config_only:
        from transformers import AutoTokenizer

        model = _model_from_config(model_config_only, model_init_kwargs)
        processing_class = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
    else:
        training_args.model_init_kwargs = model_init_kwargs

    dataset = load_dataset(script_args.dataset_name, name=script_args.dataset_config)
    train_dataset = dataset[script_args.dataset_train_split].select_columns(["messages"])

    trainer = SFTTrainer(
        model=model,
        processing_class=processing_class,
        args=training_args,
        train_dataset=train_dataset,
        peft_config=get_peft_config(model_args),
    )
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    if not model_config_only:   # random weights from a config: nothing worth saving
        trainer.save_model(training_args.output_dir)
    _write_summary(trainer, training_args)
    trainer.accelerator.print(f"Model saved to {training_args.output_dir}." if not model_config_only else
                              "Model built from a config only: not saved.")
    if Version(transformers.__version__) >= Version("5.18.0"):
        trainer.end()


if __name__ == "__main__":
    _parallel_sizes()  # before the process group exists (SFTConfig parsing creates it)
    from trl import ModelConfig, ScriptArguments, SFTConfig, TrlParser

    local, argv = _take_local_flags(sys.argv[1:])
    parser = TrlParser((ScriptArguments, SFTConfig, ModelConfig))
    script_args, training_args, model_args = parser.parse_args_and_config(args=argv)
    main(script_args, training_args, model_args, local.model_config_only)
