"""plan/_child.py through `python -m torch_neuronx.plan run`: a Ctrl-C or a `kill` of the planner reaches
the script's process once, the planner then ends by the same signal, a killed planner takes its child
with it, and a child past its timeout is killed. Each signal is sent when the script has said (in a
file) that it is waiting for it: nothing depends on how fast the processes start."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

# the script under `plan run`: counts the signals it gets into a file, says it is ready, waits
SCRIPT = r'''
import json, os, signal, sys, time
import torch, torch_neuronx
state = sys.argv[1]
got = []

def record(sig, _frame):
    got.append(signal.Signals(sig).name)
    with open(state + ".tmp", "w") as f:
        json.dump({"pid": os.getpid(), "got": got}, f)
    os.replace(state + ".tmp", state)

signal.signal(signal.SIGINT, record)
signal.signal(signal.SIGTERM, record)
torch.zeros(4, device="neuron")   # the dry run is in force
with open(state + ".tmp", "w") as f:
    json.dump({"pid": os.getpid(), "got": []}, f)
os.replace(state + ".tmp", state)
# a short sleep, not signal.pause(): a signal that lands between the test of `got` and pause() would
# leave pause() waiting for a second one that never comes (the planner forwards each signal once)
while not got or sys.argv[2:] == ["forever"]:
    time.sleep(0.05)
'''

DEADLINE_S = 600   # only a hang takes this long: each step is one process start, slow on a loaded host


def _as_a_foreground_job():
    """Signal dispositions as a terminal's foreground job has them. A shell starts a background job
    (`cmd &`, `nohup`) with SIGINT, SIGQUIT and SIGHUP ignored, every process below inherits that, and
    the planner rightly leaves an ignored SIGINT ignored: a suite started so must not see its Ctrl-C
    tests hang."""
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


@contextlib.contextmanager
def _started(tmp_path, *extra):
    """`plan run` of SCRIPT; on leaving, whatever of it still runs is killed (a test that gives up, or
    fails, leaves no planner or script behind)."""
    script, state = tmp_path / "waits.py", tmp_path / "state.json"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_NEURONX_PLAN_", "TORCH_NEURONX_DRY_RUN"))}
    # its own session, as a terminal's foreground job: a killpg is what a Ctrl-C at the terminal sends
    planner = subprocess.Popen([sys.executable, "-m", "torch_neuronx.plan", "run", "--quiet", "--", str(script),
                                str(state), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env, start_new_session=True, preexec_fn=_as_a_foreground_job)
    try:
        yield planner, state
    finally:
        # the script has a session of its own (the planner's child) and records SIGTERM, the signal a
        # dying planner sends it, instead of ending: SIGKILL both groups
        for pid in (planner.pid, (_state(state) or {}).get("pid")):
            _kill_group(pid)
        planner.communicate()


def _kill_group(pid):
    if pid is None:
        return
    for kill in (os.killpg, os.kill):   # the group it leads, else the process alone
        try:
            kill(pid, signal.SIGKILL)
            return
        except (ProcessLookupError, PermissionError):
            continue


def _wait_for(check, what):
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


def _state(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _ready(planner, state):
    ready = _wait_for(lambda: _state(state) or planner.poll() is not None, "the script to start")
    assert isinstance(ready, dict), planner.communicate()[1][-3000:]
    return ready["pid"]


def test_ctrl_c_reaches_the_script_once_and_the_planner_ends_by_it(tmp_path):
    with _started(tmp_path) as (planner, state):
        script_pid = _ready(planner, state)
        assert os.getpgid(script_pid) != os.getpgid(planner.pid)   # the terminal's Ctrl-C reaches the planner only
        os.killpg(planner.pid, signal.SIGINT)                      # what a Ctrl-C at the terminal sends
        out, err = planner.communicate(timeout=DEADLINE_S)
        assert planner.returncode == -signal.SIGINT, err[-3000:]   # as an interrupted Python ends
        assert _state(state)["got"] == ["SIGINT"]                  # forwarded, once
        assert "Traceback" not in err and "# Dry run" not in out   # no second traceback, no report of a stopped plan
        assert _gone(script_pid)


def test_kill_of_the_planner_reaches_the_script_and_ends_the_planner(tmp_path):
    with _started(tmp_path) as (planner, state):
        script_pid = _ready(planner, state)
        planner.send_signal(signal.SIGTERM)    # `kill PID`: the planner alone
        planner.communicate(timeout=DEADLINE_S)
        assert planner.returncode == -signal.SIGTERM
        assert _state(state)["got"] == ["SIGTERM"]
        assert _gone(script_pid)


def test_a_planner_killed_outright_takes_its_script_with_it(tmp_path):
    with _started(tmp_path, "forever") as (planner, state):
        _ready(planner, state)
        planner.kill()                     # SIGKILL: nothing of the planner runs
        planner.wait(timeout=DEADLINE_S)   # (its pipes stay open in the script until the script ends)
        got = _wait_for(lambda: (_state(state) or {}).get("got"), "the script to hear of its planner's end")
        # the parent-death signal (Linux may send it once per thread of the dying planner: the
        # orphan passes from thread to thread before init adopts it; the first ends a plain script)
        assert set(got) == {"SIGTERM"}
        # this script records SIGTERM instead of ending: leaving `_started` kills it


# a supervisor whose SIGINT lands on another of its threads, as the kernel may choose for a signal sent
# to the process: its main thread, waiting for the child, must still forward it
OTHER_THREAD = r'''
import json, os, signal, sys, threading, time
from torch_neuronx.plan import _child as child, _command as command
script, state, report = sys.argv[1:4]

def ctrl_c_on_this_thread():
    while not os.path.exists(state):
        time.sleep(0.05)
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)

threading.Thread(target=ctrl_c_on_this_thread, daemon=True).start()
try:
    with child.supervise():
        result = child.Child(["run", "--quiet", "--", script, state], command.child_environment(report=report)).wait()
except child.Interrupted:
    print("interrupted")
'''


def test_a_signal_landing_on_another_thread_is_still_forwarded(tmp_path):
    script, state, harness = tmp_path / "waits.py", tmp_path / "state.json", tmp_path / "harness.py"
    script.write_text(SCRIPT)
    harness.write_text(OTHER_THREAD)
    out = subprocess.run([sys.executable, str(harness), str(script), str(state), str(tmp_path / "r.json")],
                         capture_output=True, text=True, timeout=DEADLINE_S, start_new_session=True,
                         preexec_fn=_as_a_foreground_job)
    assert out.stdout.split() == ["interrupted"], out.stderr[-3000:]
    assert _state(state)["got"] == ["SIGINT"]


def test_a_child_past_its_timeout_is_killed_with_what_it_started(tmp_path):
    from torch_neuronx.plan import _child as child, _command as command

    script, state = tmp_path / "waits.py", tmp_path / "state.json"
    script.write_text(SCRIPT)
    started = time.monotonic()
    env = command.child_environment(report=str(tmp_path / "r.json"))
    result = child.run(["run", "--quiet", "--", str(script), str(state), "forever"], env, timeout=1.0, capture=True)
    assert result.timed_out and result.returncode == -signal.SIGKILL
    assert time.monotonic() - started < DEADLINE_S
    pid = (_state(state) or {}).get("pid")
    assert pid is None or _gone(pid)


def test_captured_output_keeps_the_tail_of_each_stream(tmp_path):
    from torch_neuronx.plan import _child as child, _command as command

    script = tmp_path / "talks.py"
    script.write_text("import sys\nfor i in range(100):\n    print(f'out {i}')\nprint('the last word', file=sys.stderr)\n"
                      "sys.exit(3)\n")
    seen = []
    env = command.child_environment(report=str(tmp_path / "r.json"))
    result = child.run(["run", "--quiet", "--", str(script)], env, capture=True, on_line=seen.append)
    assert result.returncode == 3 and not result.timed_out
    assert result.stdout_tail[-1] == "out 99\n" and len(result.stdout_tail) == child.TAIL_LINES
    assert "the last word\n" in result.stderr_tail
    assert [ln for ln in seen if ln.startswith("out ")] == [f"out {i}\n" for i in range(100)]


def test_is_child_is_read_once_and_not_inherited():
    """A planner's child's own subprocesses (the user's script may start some) are not children."""
    code = ("import os\nfrom torch_neuronx.plan import _child as child\n"
            "print(child.is_child(), child.CHILD_ENV in os.environ, child.is_child())")
    env = dict(os.environ, TORCH_NEURONX_PLAN_CHILD=str(os.getpid()))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=DEADLINE_S)
    assert out.stdout.split() == ["True", "False", "True"], out.stderr[-2000:]
    env.pop("TORCH_NEURONX_PLAN_CHILD")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=DEADLINE_S)
    assert out.stdout.split() == ["False", "False", "False"], out.stderr[-2000:]



def test_a_plan_child_has_a_fixed_hash_seed_unless_the_user_set_one():
    from torch_neuronx.plan import _command as command

    assert command.child_environment(base={})["PYTHONHASHSEED"] == "0"
    assert command.child_environment(base={"PYTHONHASHSEED": "7"})["PYTHONHASHSEED"] == "7"
