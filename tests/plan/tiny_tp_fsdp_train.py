"""A tiny Qwen3 trained with transformers' DistributedConfig(tp_size=TP_SIZE, fsdp_size=FSDP_SIZE), as
examples/sft_neuron_example.py shards it: the model loads already sharded (TP by DTensor, FSDP2 by
fully_shard), then two AdamW steps on random tokens. Run under torchrun or `plan run`."""
import os
import tempfile

import torch
from transformers import AutoModelForCausalLM, Qwen3Config
from transformers.distributed import DistributedConfig

TINY = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
            num_key_value_heads=4, head_dim=16, max_position_embeddings=64, tie_word_embeddings=False)

with tempfile.TemporaryDirectory() as model_dir:   # one per rank: no rank waits for another's files
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(Qwen3Config(**TINY)).save_pretrained(model_dir)
    config = DistributedConfig(tp_size=int(os.environ["TP_SIZE"]), fsdp_size=int(os.environ["FSDP_SIZE"]))
    model = AutoModelForCausalLM.from_pretrained(model_dir, distributed_config=config, dtype=torch.float32)
device = next(model.parameters()).device
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(2):
    ids = torch.randint(0, TINY["vocab_size"], (2, 32), device=device)
    loss = model(input_ids=ids, labels=ids).loss
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"rank {os.environ['RANK']} on {device}: loss {loss.item():.4f}")
