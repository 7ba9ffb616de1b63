"""Tensor-parallel generation with transformers on neuron, under torchrun.

    torchrun --nproc_per_node 2 examples/hf_tp_generate.py --model Qwen/Qwen3-0.6B     # connected machine
    torchrun --nproc_per_node 4 examples/hf_tp_generate.py --tiny --check              # offline

Each rank loads only its shard of the weights (`DistributedConfig(tp_size=world_size)` with a 1-D
`DeviceMesh("neuron", ...)`), the KV cache is static (`max_cache_len`), the prompt is prefilled in chunks
(`prefill_chunk_size`) and the decode step is compiled with backend "neuron". `--tiny` first builds a
small random Llama-style model and a local tokenizer (nothing is downloaded); `--check` makes rank 0
compare the greedy tokens with a single-process CPU run of the same weights.
"""
from __future__ import annotations

import argparse
import os
import tempfile

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, CompileConfig, GenerationConfig
from transformers.distributed import DistributedConfig
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

PROMPTS = ["What is the capital of France?", "Tell me a short story about a robot."]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="Qwen/Qwen3-0.6B")
    p.add_argument("--tiny", action="store_true", help="build a tiny local model first (offline)")
    p.add_argument("--tiny-dir", default=os.path.join(tempfile.gettempdir(), "torch_neuronx_tiny_tp"))
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--max-cache-len", type=int, default=128)
    p.add_argument("--prefill-chunk-size", type=int, default=16)
    p.add_argument("--pad-to-multiple-of", type=int, default=16)
    p.add_argument("--check", action="store_true", help="rank 0 compares with CPU greedy tokens")
    p.add_argument("--config-only", action="store_true",
                   help="--model is a folder with only a config.json: random weights (for a dry run, "
                        "python -m torch_neuronx.plan run), and a small local tokenizer when it has none")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    args = p.parse_args()

    dist.init_process_group(backend="neuron")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.neuron.set_device(int(os.environ.get("LOCAL_RANK", rank)))

    model_id = args.model
    if args.tiny:
        model_id = args.tiny_dir
        if rank == 0:
            from torch_neuronx.integrations.tiny_models import build_tiny_model

            # heads and KV heads divisible by the TP degree (up to 8)
            build_tiny_model(model_id, num_attention_heads=8, num_key_value_heads=8, head_dim=8)
        dist.barrier()

    model_class, source, weights = AutoModelForCausalLM, model_id, {}
    if args.config_only:   # no weights to read: the model's own init fills them (shape-only in a dry run)
        config = AutoConfig.from_pretrained(model_id)
        model_class, source, weights = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)], None, {"config": config,
                                                                                         "state_dict": {}}
    if args.config_only and not os.path.exists(os.path.join(model_id, "tokenizer_config.json")):
        from torch_neuronx.integrations.tiny_models import build_tokenizer

        tokenizer = build_tokenizer()   # its ids are valid in any larger vocabulary
    else:
        tokenizer = AutoTokenizer.from_pretrained(model_id, padding_side="left")
    model = model_class.from_pretrained(
        source,
        distributed_config=DistributedConfig(tp_size=world_size),
        device_mesh=DeviceMesh("neuron", list(range(world_size))),
        dtype=getattr(torch, args.dtype),
        **weights,
    )
    messages = [[{"role": "user", "content": text}] for text in PROMPTS]
    texts = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    inputs = tokenizer(texts, return_tensors="pt", padding=True, pad_to_multiple_of=args.pad_to_multiple_of)
    inputs = inputs.to(model.device)
    generation_config = GenerationConfig(
        do_sample=False, max_new_tokens=args.max_new_tokens, cache_implementation="static",
        cache_config={"max_cache_len": args.max_cache_len}, prefill_chunk_size=args.prefill_chunk_size,
        compile_config=CompileConfig(backend="neuron", fullgraph=False, dynamic=False),
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    with torch.no_grad():
        out = model.generate(**inputs, generation_config=generation_config)
    new_tokens = out[:, inputs["input_ids"].shape[1]:].cpu()
    if rank == 0:
        for text, toks in zip(PROMPTS, new_tokens):
            print(f"[{world_size} ranks] {text!r} -> {tokenizer.decode(toks, skip_special_tokens=True)!r}")
        if args.check:
            cpu_model = AutoModelForCausalLM.from_pretrained(model_id, dtype=torch.float32)
            cpu_inputs = {k: v.cpu() for k, v in inputs.items()}
            with torch.no_grad():
                ref = cpu_model.generate(**cpu_inputs, do_sample=False, max_new_tokens=args.max_new_tokens,
                                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
            ref_new = ref[:, cpu_inputs["input_ids"].shape[1]:]
            same = ref_new.shape == new_tokens.shape and torch.equal(ref_new, new_tokens)
            print(f"greedy tokens equal single-process CPU: {same}")
            if not same:
                print("cpu:   ", ref_new.tolist(), "\nneuron:", new_tokens.tolist())
                raise SystemExit(1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
