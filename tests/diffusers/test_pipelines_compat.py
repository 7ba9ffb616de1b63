"""Pipelines compatibility suite command, compile behaviour of repeated blocks, and bad input messages."""
from __future__ import annotations

import json
import sys

from tests.conftest import run_python
from tests.diffusers.helpers import REPO, run_example


def test_suite_command_eager_and_compiled(tmp_path):
    out = tmp_path / "report"
    proc = __import__("subprocess").run(
        [sys.executable, "-m", "torch_neuronx.compat.diffusers", "--pipelines", "sd3,flux", "--out", str(out)],
        capture_output=True, text=True, timeout=400, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["summary"]["passed"] == data["summary"]["total"] == 2
    sd3, flux = data["records"]
    assert sd3["eager_bitwise"]                      # no rope: bit-identical to CPU
    assert 0 < flux["eager_max_diff"] < 1e-5         # diffusers' fp32 rope on neuron vs fp64 on CPU
    for r in data["records"]:
        assert r["graphs_compiled_second_call"] == 0 and r["compiled_max_diff"] < 1e-3
    # SD3 defines no _repeated_blocks: the whole denoiser is one graph
    assert sd3["compiled"] == "torch.compile(denoiser)" and sd3["graphs_compiled"] == 1, sd3
    # FLUX: 1 double-stream + 1 single-stream block, one graph per block class, no recompiles
    assert flux["compiled"] == "compile_repeated_blocks" and flux["blocks"] == 2, flux
    assert flux["graphs_compiled"] == 2 and flux["recompilations"] == 0, flux
    md = (tmp_path / "report.md").read_text()
    assert "Pass rate: 2/2" in md and "StableDiffusion3Pipeline" in md


def test_suite_rejects_unknown_pipeline():
    proc = __import__("subprocess").run(
        [sys.executable, "-m", "torch_neuronx.compat.diffusers", "--pipelines", "nope"],
        capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 2 and "unknown pipeline(s) ['nope']; known: qwenimage21" in proc.stderr


def test_repeated_blocks_compile_once_per_shape_without_kv_cache():
    """use_kv_cache=False: the 2 Qwen-Image-2.1 blocks share one graph for both steps; a second call and a
    second model instance compile nothing more."""
    proc = run_python("""
        import json, tempfile, warnings, torch, torch_neuronx
        warnings.filterwarnings("ignore")
        from torch_neuronx.compat.diffusers import tiny_qwenimage21 as tq
        path = tq.build(tempfile.mkdtemp())
        pipe = tq.load(path).to("neuron")
        pipe.transformer.compile_repeated_blocks(backend="neuron", fullgraph=True, dynamic=False)
        def call():
            return pipe(prompt_embeds=tq.prompt_embeds().to("neuron"), height=64, width=64, num_inference_steps=2,
                        generator=torch.Generator("cpu").manual_seed(0), output_type="pt",
                        use_kv_cache=False).images.cpu()
        a = call(); m1 = torch_neuronx.get_dynamo_metrics()
        b = call(); m2 = torch_neuronx.get_dynamo_metrics()
        print(json.dumps({"g1": m1["graphs_compiled"], "r1": m1["recompilations"], "g2": m2["graphs_compiled"],
                          "same": torch.equal(a, b)}))
    """, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res == {"g1": 1, "r1": 0, "g2": 1, "same": True}, res


def test_bad_inputs_name_the_fix(tmp_path):
    # TP degree that does not divide the heads: the example says which degrees work, before any load
    result, proc = run_example(3, "--tiny-dir", str(tmp_path / "pipe"), "--out", str(tmp_path / "x.png"))
    assert proc.returncode != 0 and result is None
    assert "does not divide the transformer's 8 attention heads" in proc.stderr and "[1, 2, 4, 8]" in proc.stderr
    proc = run_python(f"""
        import os, warnings, torch, torch.distributed as dist
        warnings.filterwarnings("ignore")
        from torch_neuronx.compat.diffusers import tiny_qwenimage21 as tq
        from diffusers import QwenImage21Pipeline, QwenImage21Transformer2DModel, TensorParallelConfig
        from diffusers.hooks.tensor_parallel import resolve_tp_shard_specs
        from torch.distributed.device_mesh import DeviceMesh
        p = tq.build({str(tmp_path / 'pipe')!r})
        m = QwenImage21Transformer2DModel.from_pretrained(p, subfolder="transformer")
        try:
            resolve_tp_shard_specs(m, m._tp_plan, 3)
        except ValueError as e:
            print("TPDEG", e)
        try:
            QwenImage21Pipeline.from_pretrained(p)          # processor/text_encoder not passed
        except ValueError as e:
            print("MISSING", e)
        dist.init_process_group("neuron", init_method="tcp://127.0.0.1:" + str(__import__("tests.diffusers.helpers",
                                fromlist=["x"])._free_port()), rank=0, world_size=1)
        try:
            QwenImage21Transformer2DModel.from_pretrained(p, subfolder="transformer",
                parallel_config=TensorParallelConfig(mesh=DeviceMesh("cpu", [0])))
        except ValueError as e:
            print("CPUMESH", e)
        dist.destroy_process_group()
    """, timeout=200, cwd=REPO)
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "TPDEG Cannot shard 'transformer_blocks.0.attn.to_q.weight' across 3 tensor-parallel ranks" in out
    assert "MISSING" in out and "expected ['processor', 'scheduler', 'text_encoder'" in out
    assert "CPUMESH Tensor parallelism is not supported on device type 'cpu'" in out and "'neuron'" in out
