"""neuron-top: the screen it draws, from samples and in a real terminal (tmux)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time

import pytest
from rich.console import Console

from torch_neuronx.tools import top
from torch_neuronx.tools.api.collector import take_sample
from torch_neuronx.tools.api.devices import instance_view

from .conftest import samples_around_work


def _draw(renderable) -> str:
    console = Console(width=140, record=True, file=open(os.devnull, "w"))
    console.print(renderable)
    return console.export_text()


def test_render_sections_tabs_and_toggle(worker, runtime_dir):
    view = instance_view()
    before, after = samples_around_work(runtime_dir, worker.pid)
    state = top.State()
    screen = _draw(top.render(view, before, after, state))
    for section in ("NeuronCore v3d Utilization (%)", "VCPU Utilization", "Memory Usage Summary",
                    "Memory Usage Details", "[0] all", f"[1] {worker.pid}"):
        assert section in screen, screen
    assert "NC0" in screen and "NC1" in screen and "tensors 1.0MiB" in screen
    assert top.handle_key("F", state, 1) and state.tflops
    assert "TFLOPS" in _draw(top.render(view, before, after, state))
    assert top.handle_key("\t", state, 1) and state.tab == 1
    assert not top.handle_key("q", state, 1)


def test_empty_registry_draws_an_empty_view(tmp_path):
    view = instance_view()
    s = take_sample(tmp_path / "none")
    screen = _draw(top.render(view, s, s, top.State()))
    assert "no NeuronCore in use" in screen and "no process is using the NeuronCores" in screen


JOB = textwrap.dedent("""
    import os, time, torch, torch_neuronx
    rank = int(os.environ["LOCAL_RANK"])
    x = torch.randn(128, 128, device=f"neuron:{rank}")
    deadline = time.monotonic() + float(os.environ["JOB_SECONDS"])
    while time.monotonic() < deadline:
        if rank == 0:   # estimates on in rank 0 only: its estimated FLOPs reach neuron-top
            with torch_neuronx.estimate():
                for _ in range(20):
                    y = (x @ x).tanh()
        else:
            y = (x @ x).tanh()
""")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux for a real terminal")
def test_live_in_tmux_with_a_torchrun_job(tmp_path):
    """A 2-rank torchrun job (4 ranks are too heavy for the 2-core CI machine) watched from a real terminal."""
    env = dict(os.environ, TORCH_NEURONX_RUNTIME_DIR=str(tmp_path), JOB_SECONDS="900")  # ended by the test's `finally`
    script = tmp_path / "job.py"
    script.write_text(JOB)
    job = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                            "--standalone", str(script)], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    session = f"neuron-top-{os.getpid()}"
    tmux = ["tmux", "-L", session]
    try:
        from torch_neuronx.tools.api.registry import list_processes
        deadline = time.monotonic() + 300   # deadlines here: only a hang reaches them
        while len(list_processes(tmp_path)) < 2 and time.monotonic() < deadline and job.poll() is None:
            time.sleep(0.2)
        ranks = [e.pid for e in list_processes(tmp_path)]
        assert len(ranks) == 2, job.stderr.read().decode() if job.poll() is not None else ranks
        cmd = f"{sys.executable} -m torch_neuronx.tools.top -d 0.5"
        subprocess.run(tmux + ["new-session", "-d", "-s", session, "-x", "150", "-y", "50",
                               "-e", f"TORCH_NEURONX_RUNTIME_DIR={tmp_path}",
                               "-e", f"PYTHONPATH={os.environ.get('PYTHONPATH', '')}", cmd], check=True)
        subprocess.run(tmux + ["resize-window", "-t", session, "-x", "150", "-y", "50"], capture_output=True)

        def screen() -> str:
            return subprocess.run(tmux + ["capture-pane", "-p", "-t", session], capture_output=True,
                                  text=True).stdout

        def wait_for(text: str) -> str:
            end = time.monotonic() + 300
            while time.monotonic() < end:
                s = screen()
                if text in s:
                    return s
                time.sleep(0.3)
            raise AssertionError(f"{text!r} not drawn:\n{s}")

        s = wait_for(f"[2] {ranks[1]}")   # the tab of each rank, with both ranks' cores busy
        s = wait_for(f"pid {ranks[0]}")
        assert "NeuronCore v3d Utilization (%)" in s and f"[1] {ranks[0]}" in s and "NC0" in s and "NC1" in s
        assert "VCPU Utilization" in s and "Memory Usage Summary" in s and "Memory Usage Details" in s
        subprocess.run(tmux + ["send-keys", "-t", session, "F"], check=True)
        wait_for("Utilization (TFLOPS)")
        # rank 0's estimated FLOPs reach the page once its first estimate() has started (slow on a
        # loaded host): a TFLOPS figure per core, and the per-process one in the details
        end = time.monotonic() + 300
        while time.monotonic() < end:
            s = screen()
            if "n/a TFLOPS" not in s and re.search(r"\d\.\d{3} TFLOPS", s) and re.search(r"est\. \d+\.\d{4}", s):
                break
            time.sleep(0.3)
        else:
            raise AssertionError(f"no estimated TFLOPS drawn:\n{s}")
        subprocess.run(tmux + ["send-keys", "-t", session, "2"], check=True)
        s = wait_for(f"pid {ranks[1]}")        # rank 1's own tab
        assert f"pid {ranks[0]}" not in s
        subprocess.run(tmux + ["send-keys", "-t", session, "q"], check=True)
        end = time.monotonic() + 120
        while time.monotonic() < end and subprocess.run(tmux + ["has-session", "-t", session],
                                                        capture_output=True).returncode == 0:
            time.sleep(0.2)
        assert subprocess.run(tmux + ["has-session", "-t", session], capture_output=True).returncode != 0, \
            "q did not quit neuron-top"
    finally:
        subprocess.run(tmux + ["kill-server"], capture_output=True)
        job.terminate()
        job.wait(timeout=60)
