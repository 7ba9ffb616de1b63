"""Offline stand-ins for TorchTitan's `tests/assets` (not shipped in its wheel): a tokenizer and a text dataset.

    python examples/torchtitan_tiny_assets.py /tmp/titan-assets   # writes tokenizer/ and c4_test/ under it

* `tokenizer/`: a byte-level BPE tokenizer (vocab 512, under the debug model's 2048) saved with
  `save_pretrained`, so TorchTitan's `HuggingFaceTokenizer` reads its `tokenizer.json` and finds BOS/EOS
  in `tokenizer_config.json`. Pass it as `--hf_assets_path DIR/tokenizer`.
* `c4_test/data.json`: C4-style rows (`{"text": ...}`) that `load_dataset(path, split="train")` reads,
  the loader TorchTitan's `c4_test` dataset uses. Pass it as `--dataloader.dataset_path DIR/c4_test`.

Content is deterministic (seeded), and every rank of a torchrun job may call `ensure_assets` at once: each
builds into a private temporary folder and renames it into place.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile

_WORDS = ("the quick brown fox jumps over the lazy dog trainium neuron cores run pytorch programs "
          "compiled from graphs a robot learns to paint the river flows past an old library under the "
          "moon one two three four five six seven eight nine ten hello world").split()


def _corpus(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(20, 60))).capitalize() + "."
            for _ in range(n)]


def build(path: str, rows: int = 256, vocab_size: int = 512, seed: int = 0) -> str:
    from torch_neuronx.integrations.tiny_models import build_tokenizer

    texts = _corpus(rows, seed)
    build_tokenizer(vocab_size, corpus=texts).save_pretrained(os.path.join(path, "tokenizer"))
    os.makedirs(os.path.join(path, "c4_test"), exist_ok=True)
    with open(os.path.join(path, "c4_test", "data.json"), "w") as f:
        for text in texts:
            f.write(json.dumps({"text": text}) + "\n")
    return path


def ensure_assets(path: str) -> str:
    """Build the assets at `path` unless they are there; safe to call from every rank at once."""
    if os.path.exists(os.path.join(path, "c4_test", "data.json")):
        return path
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=parent, prefix=".titan-assets-")
    build(tmp)
    try:
        os.rename(tmp, path)
    except OSError:  # another rank won the rename; its content is the same
        shutil.rmtree(tmp, ignore_errors=True)
    return path


if __name__ == "__main__":
    print(ensure_assets(sys.argv[1] if len(sys.argv) > 1 else "/tmp/titan-assets"))
