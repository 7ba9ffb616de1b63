"""Process hygiene: fork after use is refused clearly; exit never aborts."""
import concurrent.futures

from tests.conftest import run_python


def test_forked_child_after_use_raises_spawn_hint():
    r = run_python("""
        import os, torch
        x = torch.ones(2, device="neuron")
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                torch.ones(2, device="neuron")
            except RuntimeError as e:
                code = 0 if "spawn" in str(e) else 4
            try:
                torch.neuron.init()
                code = 5
            except RuntimeError as e:
                code = code if "forked subprocess" in str(e) else 6
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), x.sum().item())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "2.0"]


def test_fork_before_use_is_fine():
    r = run_python("""
        import os, torch
        pid = os.fork()
        if pid == 0:
            os._exit(0 if torch.ones(2, device="neuron").sum().item() == 2 else 1)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0"


EXIT_AFTER_BACKWARD = """
import threading
import torch
import torch.nn as nn

def step():
    m = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to("neuron:{dev}")
    x = torch.randn(16, 32, device="neuron:{dev}")
    m(x).sum().backward()

step()  # the importing thread runs backward inline
# other threads use autograd's per-device worker threads: the exit race lives there
t = threading.Thread(target=step)
t.start()
t.join()
"""


def test_exit_after_backward_never_aborts():
    # The abort this guards against hit 7-80% of runs without the exit drain.
    runs = 24
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda i: run_python(EXIT_AFTER_BACKWARD.format(dev=i % 4)), range(runs)))
    failures = [(r.returncode, r.stderr[-300:]) for r in results if r.returncode != 0]
    assert not failures, failures
