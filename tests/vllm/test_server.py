"""`vllm serve` on neuron through `python -m torch_neuronx.integrations.vllm`: the OpenAI server answers
(chat with streaming, completions, vLLM's error response for a prompt past --max-model-len), and
`vllm bench serve` completes every request. Loopback only; every wait is bounded."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

pytestmark = pytest.mark.vllm

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_MODEL_LEN = 256


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(url: str, body: dict, timeout: float = 120):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(request, timeout=timeout)


@pytest.fixture(scope="module")
def server(model_dir, tmp_path_factory):
    path = model_dir("llama")
    port = _free_port()
    log = open(tmp_path_factory.mktemp("serve") / "serve.log", "w+")
    env = dict(os.environ, PYTHONPATH=REPO)
    process = subprocess.Popen(
        [sys.executable, "-m", "torch_neuronx.integrations.vllm", "serve", path, "--host", "127.0.0.1", "--port",
         str(port), "--dtype", "bfloat16", "--max-model-len", str(MAX_MODEL_LEN), "--max-num-seqs", "8",
         "--max-num-batched-tokens", "512", "--gpu-memory-utilization", "0.05"],
        stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while True:
            assert process.poll() is None, "vllm serve exited:\n" + open(log.name).read()[-4000:]
            assert time.monotonic() < deadline, "vllm serve did not answer /health in 600 s"
            try:
                if urllib.request.urlopen(base + "/health", timeout=5).status == 200:
                    break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(2)
        yield base, path
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
        log.close()


def test_chat_streams(server):
    base, path = server
    body = {"model": path, "messages": [{"role": "user", "content": "Hello! How are you today?"}], "max_tokens": 8,
            "temperature": 0, "stream": True}
    chunks, done = [], False
    with _post(base + "/v1/chat/completions", body) as response:
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                done = True
                break
            chunks.append(json.loads(line[len("data: "):]))
    assert done
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert len(chunks) > 2 and text  # one chunk per token, not one answer at the end


def test_completion_and_a_prompt_past_max_model_len(server):
    base, path = server
    with _post(base + "/v1/completions", {"model": path, "prompt": "The quick brown fox", "max_tokens": 5,
                                          "temperature": 0, "ignore_eos": True}) as response:
        answer = json.load(response)
    assert answer["usage"]["completion_tokens"] == 5
    with pytest.raises(urllib.error.HTTPError) as error:
        _post(base + "/v1/completions", {"model": path, "prompt": "0 1 2 3 4 5 " * MAX_MODEL_LEN, "max_tokens": 5})
    assert error.value.code == 400
    message = json.load(error.value)["error"]["message"]
    assert "maximum context length" in message or "max_model_len" in message, message
    # the engine is still serving
    with _post(base + "/v1/completions", {"model": path, "prompt": "Hello", "max_tokens": 2}) as response:
        assert json.load(response)["usage"]["completion_tokens"] >= 1


def test_bench_serve_completes_every_request(server, tmp_path):
    base, path = server
    run = subprocess.run(
        [sys.executable, "-m", "torch_neuronx.integrations.vllm", "bench", "serve", "--backend", "vllm", "--model", path,
         "--base-url", base, "--dataset-name", "random", "--random-input-len", "32", "--random-output-len", "16",
         "--num-prompts", "64", "--max-concurrency", "8", "--save-result", "--result-dir", str(tmp_path),
         "--result-filename", "bench.json"],
        env=dict(os.environ, PYTHONPATH=REPO), capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.load(open(tmp_path / "bench.json"))
    assert result["completed"] == 64 and result.get("failed", 0) == 0
    assert result["output_throughput"] > 0
