"""What `plan train` trains: the task (the model's Auto class) and one micro-batch of its inputs.

| task | Auto class | inputs of one micro-batch |
|---|---|---|
| causal-lm | AutoModelForCausalLM | token ids [micro, seq]; labels = the ids (the model shifts them) |
| masked-lm | AutoModelForMaskedLM | token ids [micro, seq]; labels = the ids at 15% of the positions, -100 (ignored) elsewhere |
| image-classification | AutoModelForImageClassification | pixel values [micro, channels, size, size]; one class label per image |

`auto` picks from the config: a vision config (an image size, no vocabulary) trains image
classification, a config transformers builds as a masked LM (BERT, RoBERTa, ...) masked-LM
pretraining, every other config a causal LM. The inputs are full size; in a dry run their memory
is phantom like every other large tensor (the labels are small and real).
"""
from __future__ import annotations

import torch

TASKS = ("auto", "causal-lm", "masked-lm", "image-classification")

# BERT's pretraining masks 15% of the input tokens (Devlin et al., "BERT: Pre-training of Deep
# Bidirectional Transformers for Language Understanding", 2018, section 3.1); Megatron-LM's BERT
# uses the same default (--mask-prob 0.15). The share changes no FLOPs: the MLM head runs on every
# position and the loss ignores the -100 labels.
MASK_FRACTION = 0.15

AUTO_CLASSES = {"causal-lm": "AutoModelForCausalLM", "masked-lm": "AutoModelForMaskedLM",
                 "image-classification": "AutoModelForImageClassification"}


class TaskError(ValueError):
    """A task the model has no class for, or inputs it cannot take; the message names the fix."""


def _auto(task: str):
    import transformers

    return getattr(transformers, AUTO_CLASSES[task])


def _has(task: str, config) -> bool:
    return type(config) in _auto(task)._model_mapping


def is_vision(config) -> bool:
    return isinstance(getattr(config, "image_size", None), int) and getattr(config, "vocab_size", None) is None


def pick(config, task: str = "auto") -> str:
    """The task to train: `task` itself when the model has its class, else TaskError naming them."""
    if task not in TASKS:
        raise TaskError(f"--task {task!r} is not a task plan train runs; use one of: {', '.join(TASKS)}")
    if task == "auto":
        if is_vision(config) and _has("image-classification", config):
            return "image-classification"
        if _has("masked-lm", config):
            return "masked-lm"
        task = "causal-lm"
    if not _has(task, config):
        usable = [t for t in TASKS[1:] if _has(t, config)]
        raise TaskError(f"model_type {config.model_type!r} has no {AUTO_CLASSES[task]} class in transformers, so "
                        f"plan train cannot train it as {task}; "
                        + (f"use --task {' or --task '.join(usable)}" if usable else
                           "plan train needs a causal LM, a masked LM or an image classifier"))
    return task


def model_class(config, task: str):
    """The class the task's Auto class builds for `config`."""
    return _auto(task)._model_mapping[type(config)]


def check(config, task: str, layout, sequence: int) -> None:
    """The layouts and lengths each task is planned with; the message names the flag to change."""
    if layout.tp > 1 and not getattr(config, "base_model_tp_plan", None):
        raise TaskError(f"--tp {layout.tp}: model_type {config.model_type!r} has no tensor-parallel plan in "
                        f"transformers (its config's base_model_tp_plan), so it cannot be split over TP ranks; "
                        f"plan it with --tp 1 and --fsdp or --dp")
    if task == "causal-lm":
        return
    for flag, value in (("--pp", layout.pp), ("--cp", layout.cp), ("--ep", layout.ep)):
        if value > 1:
            raise TaskError(f"{flag} {value}: {task} is planned with --tp, --fsdp, --dp and --zero1 (pipeline, "
                            f"context and expert parallelism are planned for causal LMs); use {flag} 1")
    limit = getattr(config, "max_position_embeddings", None)
    if task == "masked-lm" and isinstance(limit, int) and sequence > limit:
        raise TaskError(f"--seq-len {sequence} exceeds the model's max_position_embeddings={limit} (its learned "
                        f"position embeddings end there); use --seq-len {limit} or less")


def tokens_per_sequence(config, task: str, seq_len: int) -> int:
    """Tokens one sample puts through the model: `seq_len`, or for a vision transformer its image's
    patches ((image_size / patch_size)^2; the class token not counted); 1 for an image model
    without patches (one sample = one image)."""
    if task != "image-classification":
        return seq_len
    patch = getattr(config, "patch_size", None)
    if isinstance(patch, int) and patch > 0:
        return (config.image_size // patch) ** 2
    return 1


def inputs(config, task: str, micro_batch: int, seq_len: int, dtype: torch.dtype, device) -> dict:
    """Keyword arguments of one micro-batch for the model's forward (with labels: it returns the loss)."""
    if task == "image-classification":
        channels = getattr(config, "num_channels", 3)
        pixels = torch.randn(micro_batch, channels, config.image_size, config.image_size, dtype=dtype, device=device)
        labels = torch.randint(0, max(config.num_labels, 1), (micro_batch,), device=device)
        return {"pixel_values": pixels, "labels": labels}
    vocab = config.get_text_config().vocab_size
    ids = torch.randint(0, vocab, (micro_batch, seq_len), device=device)
    if task == "causal-lm":
        return {"input_ids": ids, "labels": ids}
    # the masked positions: a fixed-seed draw on the host, the same in every plan
    picked = torch.rand(micro_batch, seq_len, generator=torch.Generator().manual_seed(0)) < MASK_FRACTION
    labels = torch.where(picked.to(device), ids, torch.full_like(ids, -100))
    return {"input_ids": ids, "labels": labels}
