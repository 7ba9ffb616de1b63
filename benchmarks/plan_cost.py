"""What a plan costs on the machine that makes it: wall time and peak resident memory of the
model-level plans against the size of the model, per layer, so a user can tell what a 405B plan costs.

For each plan (train, generate) and each layer count, `python -m torch_neuronx.plan train|generate`
runs in a fresh process on the config with `num_hidden_layers` overridden; its wall time and peak
RSS and CPU time (`os.wait4`'s rusage of that child) are printed. The baseline is the smallest layer count of the
same run: each row prints its ratio to it (CPU time: wall time depends on how busy a shared host is),
and the per-layer cost is the slope between the smallest and the largest count (CPU s, wall s and MiB
of RSS per layer), extrapolated to `--extrapolate` layers.

    python benchmarks/plan_cost.py                                   # Qwen3-8B config, dry run
    python benchmarks/plan_cost.py --layers 1,2,4 --real --width 256  # without the dry-run core: a
                                                                       # narrow model for real
`--plans gen-script,sft-script` costs the announcement's scripts themselves under `plan run` (the plans
with the layer count cut): the TP generation script (`--tp` ranks, `--ranks 0`, compiled static-cache
decode, 2 prompts of `--input-tokens`, `--output-tokens` new) on `--gen-config` (the 27.5B
Qwen3-style config), and the TRL SFT script (TP_SIZE x FSDP_SIZE = `--tp` x `--fsdp`, ranks 0 and
last, batch `--micro-batch` x `--seq-len`, compiled, 2 steps) on `--config`:

    python benchmarks/plan_cost.py --plans gen-script --layers 2,6 --tp 8 --output-tokens 8

Target: a full-size Qwen3-8B training step plans in under 4 GB of resident host
memory; PASS/MISS is printed for the train rows at the config's own layer count when it is run.
Never asserts; exit 0.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RSS_TARGET_BYTES = 4e9


def _config_dir(src: str, layers: int, width: int | None, tmp: str) -> str:
    data = json.load(open(os.path.join(src, "config.json") if os.path.isdir(src) else src))
    data["num_hidden_layers"] = layers
    data.pop("layer_types", None)   # rebuilt by transformers for the new layer count
    if "max_window_layers" in data:
        data["max_window_layers"] = layers
    if width:   # a narrow model of the same shape family (for --real without the dry-run core)
        heads = data["num_attention_heads"]
        data.update(hidden_size=width, head_dim=max(1, width // heads), intermediate_size=3 * width,
                    vocab_size=min(data["vocab_size"], 32 * width))
    out = os.path.join(tmp, f"L{layers}")
    os.makedirs(out, exist_ok=True)
    json.dump(data, open(os.path.join(out, "config.json"), "w"))
    return out


def _run(cmd: list[str], timeout: float, extra_env: dict | None = None) -> tuple[float, float, int, int]:
    """(wall s, CPU s, peak RSS bytes, exit code) of one child and its children (CPU: user + system,
    the figure that depends least on how busy a shared host is; RSS: the largest process)."""
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), **(extra_env or {})}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = t0 + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):   # 1: the plan ran and does not fit
        err = proc.stderr.read().strip().splitlines()
        print(f"  ! exit {proc.returncode}: {err[-1] if err else ''}", file=sys.stderr)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, proc.returncode


def _script_cmd(plan: str, cfg: str, args, tmp: str) -> tuple[list[str], dict]:
    """`plan run` of one of the announcement's scripts on the config folder `cfg` (its command, its env)."""
    head = [sys.executable, "-m", "torch_neuronx.plan", "run", "--instance", args.instance]
    if plan == "gen-script":
        n = max(args.output_tokens, 2)
        return head + ["--nproc-per-node", str(args.tp), "--ranks", "0", "--",
                       os.path.join(REPO, "examples", "hf_tp_generate.py"), "--model", cfg, "--config-only",
                       "--dtype", "bfloat16", "--max-new-tokens", str(n), "--max-cache-len",
                       str(args.input_tokens + n), "--prefill-chunk-size", str(args.input_tokens),
                       "--pad-to-multiple-of", str(args.input_tokens)], {}
    assets = os.path.join(tmp, "sft-assets")
    if not os.path.isdir(assets):   # the script's tokenizer and dataset (tiny, local)
        subprocess.run([sys.executable, os.path.join(REPO, "examples", "sft_tiny_assets.py"), assets],
                       check=True, capture_output=True)
    return head + ["--nproc-per-node", str(args.tp * args.fsdp), "--",
                   os.path.join(REPO, "examples", "sft_neuron_example.py"), "--tiny_local_assets", assets,
                   "--model_config_only", cfg, "--output_dir", os.path.join(tmp, "sft-out"),
                   "--max_length", str(args.seq_len), "--per_device_train_batch_size", str(args.micro_batch),
                   "--max_steps", "2", "--packing", "true", "--packing_strategy", "wrapped", "--dtype",
                   "bfloat16", "--torch_compile", "true", "--report_to", "none", "--save_only_model", "true"], \
        {"TP_SIZE": str(args.tp), "FSDP_SIZE": str(args.fsdp)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=os.path.join(REPO, "examples", "configs", "qwen3-8b"))
    p.add_argument("--gen-config", default=os.path.join(REPO, "examples", "configs", "qwen3-27b-tp"),
                   help="the TP generation script's config (--plans gen-script)")
    p.add_argument("--layers", default="1,2,4")
    p.add_argument("--plans", default="train,generate", help="train, generate (model-level commands), "
                   "gen-script, sft-script (the announcement's scripts under plan run)")
    p.add_argument("--instance", default="trn2.48xlarge")
    p.add_argument("--tp", type=int, default=4)
    p.add_argument("--fsdp", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--input-tokens", type=int, default=512)
    p.add_argument("--output-tokens", type=int, default=8)
    p.add_argument("--real", action="store_true", help="plan for real (no dry-run core): use --width")
    p.add_argument("--width", type=int, default=None, help="hidden size of a narrow stand-in model")
    p.add_argument("--extrapolate", type=int, default=126, help="layer count to extrapolate to (405B: 126)")
    p.add_argument("--timeout", type=float, default=900)
    args = p.parse_args()
    layers = sorted(int(v) for v in args.layers.split(","))
    configs = {args.gen_config if plan == "gen-script" else args.config for plan in args.plans.split(",")}
    print(f"plan cost: {', '.join(sorted(configs))} (width {args.width or 'as configured'}), {args.instance}, "
          f"{'real run' if args.real else 'dry run'}; baseline = {layers[0]} layer(s)")
    print(f"{'plan':9} {'layers':>6} {'wall s':>8} {'CPU s':>7} {'x base':>7} {'peak RSS MiB':>13} {'x base':>7} exit")
    with tempfile.TemporaryDirectory() as tmp:
        for plan in args.plans.split(","):
            rows = []
            for n in layers:
                cfg = _config_dir(args.gen_config if plan == "gen-script" else args.config, n, args.width, tmp)
                cmd = [sys.executable, "-m", "torch_neuronx.plan", plan, "--config", cfg,
                       "--instance", args.instance, "--tp", str(args.tp)]
                extra_env = {}
                if plan in ("gen-script", "sft-script"):
                    cmd, extra_env = _script_cmd(plan, cfg, args, tmp)
                elif plan == "train":
                    cmd += ["--fsdp", str(args.fsdp), "--seq-len", str(args.seq_len),
                            "--micro-batch", str(args.micro_batch)]
                else:
                    # eager generate(): the per-layer cost of running every layer (the deployed mode
                    # compiles 1- and 2-layer probes whatever the depth)
                    cmd += ["--input-tokens", str(args.input_tokens), "--output-tokens", str(args.output_tokens),
                            "--mode", "eager"]
                if args.real and plan in ("train", "generate"):
                    cmd.append("--real")
                wall, cpu, rss, code = _run(cmd, args.timeout, extra_env)
                rows.append((n, wall, cpu, rss))
                base_cpu, base_rss = rows[0][2], rows[0][3]
                print(f"{plan:9} {n:6d} {wall:8.1f} {cpu:7.1f} {cpu / base_cpu:7.2f} {rss / 2**20:13.0f} "
                      f"{rss / base_rss:7.2f} {code}", flush=True)
            if len(rows) > 1:   # a line through the smallest and the largest count
                (n0, w0, c0, r0), (n1, w1, c1, r1) = rows[0], rows[-1]
                dw, dc, dr = ((b - a) / (n1 - n0) for a, b in ((w0, w1), (c0, c1), (r0, r1)))
                at = args.extrapolate - n0
                print(f"{plan:9} per layer: {dc:.2f} CPU s ({dw:.2f} wall s), {dr / 2**20:.0f} MiB RSS; fixed: "
                      f"{c0 - dc * n0:.1f} CPU s, {(r0 - dr * n0) / 2**20:.0f} MiB; at {args.extrapolate} layers "
                      f"about {c0 + dc * at:.0f} CPU s ({w0 + dw * at:.0f} wall s here) and "
                      f"{(r0 + dr * at) / 2**30:.2f} GiB RSS", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
