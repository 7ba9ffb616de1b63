"""Offline stand-ins for the SFT example: a tiny Qwen3-style model and a local `messages` dataset.

    python examples/sft_tiny_assets.py /tmp/sft-assets     # writes model/ and data/ under it

`sft_neuron_example.py --tiny_local_assets DIR` calls `ensure_assets(DIR)` before anything else, so the
unchanged script body then reads `--model_name_or_path DIR/model --dataset_name DIR/data`.

* `model/`: Qwen3 config (hidden 64, intermediate 128, 2 layers, 4 heads, 2 kv heads, head_dim 16,
  untied embeddings), random fp32 weights (seeded), saved with `save_pretrained`, plus the byte-level BPE
  tokenizer with a ChatML chat template from `torch_neuronx.integrations.tiny_models`.
* `data/data/train_sft-00000-of-00001.jsonl`: conversations with a `messages` column and two extra columns;
  the Hub-style file name gives `load_dataset(DIR/data)` a `train_sft` split, like UltraChat's.

Every rank of a torchrun job may call `ensure_assets` at once: each builds into a private temporary
folder and renames it into place; the content is deterministic, so whichever rename wins is the same.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile

QWEN3_TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, max_position_embeddings=512, tie_word_embeddings=False)

_SUBJECTS = ["the weather", "a robot", "Paris", "the number seven", "a small garden", "the ocean",
             "a brown fox", "an old library", "a train to the mountains", "a cup of tea", "the moon",
             "a friendly dog", "a compiler", "the river", "a painting"]
_ASKS = ["Tell me about {s}.", "Write a short story about {s}.", "What do you know about {s}?",
         "Describe {s} in one sentence.", "Why do people like {s}?"]
_WORDS = ("the quick brown fox jumps over the lazy dog hello how are you today capital of france is paris "
          "a robot learns to paint trainium neuron cores run pytorch programs compiled from graphs "
          "add return one two three four five six seven eight nine ten story short river moon").split()


def _conversation(rng: random.Random) -> list[dict]:
    subject = rng.choice(_SUBJECTS)
    messages = []
    if rng.random() < 0.3:
        messages.append({"role": "system", "content": "You are a helpful assistant."})
    for _ in range(rng.randint(1, 2)):
        messages.append({"role": "user", "content": rng.choice(_ASKS).format(s=subject)})
        answer = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 40)))
        messages.append({"role": "assistant", "content": answer.capitalize() + "."})
    return messages


def build_dataset(path: str, n: int = 200, seed: int = 0) -> str:
    """Write `path/data/train_sft-00000-of-00001.jsonl` (and a small `test_sft` split); return `path`."""
    os.makedirs(os.path.join(path, "data"), exist_ok=True)
    rng = random.Random(seed)
    for split, count in (("train_sft", n), ("test_sft", max(1, n // 10))):
        with open(os.path.join(path, "data", f"{split}-00000-of-00001.jsonl"), "w") as f:
            for i in range(count):
                messages = _conversation(rng)
                row = {"prompt": messages[-2]["content"], "prompt_id": f"{split}-{i}", "messages": messages}
                f.write(json.dumps(row) + "\n")
    return path


def build_model(path: str, seed: int = 0) -> str:
    """Tiny Qwen3ForCausalLM with random weights + local tokenizer, written with `save_pretrained`."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from torch_neuronx.integrations.tiny_models import build_tokenizer

    tokenizer = build_tokenizer()
    config = Qwen3Config(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, **QWEN3_TINY)
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = Qwen3ForCausalLM(config)
    finally:
        torch.random.set_rng_state(state)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def ensure_assets(root: str, seed: int = 0) -> tuple[str, str]:
    """Build `root/model` and `root/data` unless present; return their paths. Safe to race across ranks."""
    model_dir, data_dir = os.path.join(root, "model"), os.path.join(root, "data")
    os.makedirs(root, exist_ok=True)
    for target, build in ((model_dir, build_model), (data_dir, build_dataset)):
        if os.path.isdir(target):
            continue
        tmp = tempfile.mkdtemp(prefix=".build-", dir=root)
        try:
            build(os.path.join(tmp, "out"), seed=seed)
            try:
                os.rename(os.path.join(tmp, "out"), target)
            except OSError:  # another rank got there first: same content
                if not os.path.isdir(target):
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return model_dir, data_dir


if __name__ == "__main__":
    print(*ensure_assets(sys.argv[1] if len(sys.argv) > 1 else "sft-assets"), sep="\n")
