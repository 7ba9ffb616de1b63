"""What a user sees while a plan runs: progress on a pipe (plain lines) and in a terminal (tmux), no
warnings streamed unless -v, and the warnings collected into the report's notes."""
from __future__ import annotations

import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
import warnings

import pytest

from torch_neuronx.plan import _notes as notes, _progress as progress

LINE = re.compile(r"^\[plan (\w+) (\d+:\d\d)\] (.*)$")


def _plain(command="train"):
    stream = io.StringIO()
    progress.start(command, stream=stream, plain=True)
    return stream


def test_plain_lines_say_the_stage_the_count_and_what_is_left(monkeypatch):
    stream = _plain()
    try:
        progress.stage("building the model")
        progress.stage("generating", total=4, unit="token")
        monkeypatch.setattr(progress, "PLAIN_EVERY_S", 0.0)   # every update a line
        t = time.monotonic()
        progress.update(1)
        while time.monotonic() - t < 0.05:
            pass
        progress.update(2)
        progress.update(4)
        progress.stage("writing the report")
    finally:
        progress.finish()
    lines = stream.getvalue().splitlines()
    assert all(LINE.match(ln) for ln in lines), lines
    texts = [LINE.match(ln).group(3) for ln in lines]
    assert texts[0] == "building the model" and texts[1] == "generating (0 of 4 tokens)"
    assert texts[2].startswith("generating: token 1 of 4, about ") and texts[2].endswith(" left")
    assert texts[-4] == "generating: token 4 of 4"                # no estimate once it is done
    assert texts[-3].startswith("generating: 4 tokens in ")
    assert texts[-2:] == ["writing the report", "done"]


def test_plain_counted_stage_prints_at_most_every_few_seconds():
    stream = _plain()
    try:
        progress.stage("generating", total=1000, unit="token")
        for i in range(1, 1000):
            progress.update(i)
    finally:
        progress.finish()
    assert len(stream.getvalue().splitlines()) <= 3   # stage, maybe one update, done


def test_generate_forwards_count_decode_tokens_once_each():
    stream = _plain("generate")
    try:
        progress.stage("generating", total=3, unit="token")
        progress.forward(16, key=("a", 16))      # the prefill: no token counted yet
        for n in (17, 18):                       # two decode forwards, each reported by two wrappers
            progress.forward(1, key=("ids", n))
            progress.forward(1, key=("ids", n))
        assert progress._current[-1].done == 2
    finally:
        progress.finish()


def test_quiet_shows_nothing_and_calls_are_harmless():
    assert progress.start("train", quiet=True) is None
    progress.stage("building the model")
    progress.update(3)
    progress.forward(1)
    progress.finish()
    assert not progress.active()


def test_notes_collect_warnings_and_library_logs_without_printing(capsys):
    lib = logging.getLogger("somelib_" + uuid.uuid4().hex[:6])
    own = logging.StreamHandler(sys.stderr)      # a library with its own handler, as transformers has
    lib.addHandler(own)
    lib.propagate = False
    try:
        with notes.collect() as collected:
            for _ in range(3):
                warnings.warn("cannot act on this", UserWarning)
                lib.warning("library says %s", "hello")
            warnings.warn("torch_neuronx.estimate: no cost model for aten.isin; counted as ...", RuntimeWarning)
            warnings.warn("Neuron backend does not support mode='reduce-overhead', falling back", UserWarning)
        assert lib.handlers == [own]             # restored
    finally:
        lib.removeHandler(own)
    err = capsys.readouterr().err
    assert "cannot act" not in err and "hello" not in err and "reduce-overhead" not in err
    section = collected.section(["aten.randint"], {"aten::randint": 7})
    kinds = [(n["kind"], n["text"], n["count"]) for n in section]
    # with the report's recording, exactly its unmodelled ops (the report's unmodelled_ops agree)
    assert [k for k in kinds if k[0] == "unmodelled op"] == [("unmodelled op", "aten.randint", 7)]
    # without one (a plan that stopped early), the ops the warnings named
    assert ("unmodelled op", "aten.isin", None) in [(n["kind"], n["text"], n["count"]) for n in collected.section()]
    assert ("ignored mode", "Neuron backend does not support mode='reduce-overhead', falling back", 1) in kinds
    # the default filters show a warning once per place: counted as shown
    assert ("warning", "cannot act on this", 1) in kinds
    assert ("log", f"{lib.name}: library says hello", 3) in kinds
    text = "\n".join(notes.markdown(section))
    assert "## Notes" in text and "`aten.randint` (7 times)" in text and "log (3 times" in text


def test_verbose_notes_still_stream(capsys):
    with warnings.catch_warnings():   # as outside pytest (which records warnings itself): shown on stderr
        warnings.showwarning = lambda m, c, f, n, file=None, line=None: sys.stderr.write(f"{c.__name__}: {m}\n")
        with notes.collect(verbose=True) as collected:
            warnings.warn("streamed as it happens", UserWarning)
    assert "streamed as it happens" in capsys.readouterr().err
    assert collected.section()[0]["text"] == "streamed as it happens"


def _plan(tiny_config_dir, tmp_path, *extra, command="train", timeout=300):
    out = tmp_path / f"{command}.json"
    args = ["--seq-len", "16"] if command == "train" else ["--input-tokens", "8", "--output-tokens", "4"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_NEURONX_PLAN_", "TORCH_NEURONX_DRY_RUN",
                                                                      "TORCH_NEURONX_INSTANCE_TYPE", "NEURON_LOGICAL"))}
    p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", command, "--config", tiny_config_dir,
                        "--instance", "trn2.3xlarge", "--lnc", "2", *args, "--json", str(out), *extra],
                       capture_output=True, text=True, timeout=timeout, env=env)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    return p, json.loads(out.read_text())


def test_piped_plan_prints_progress_lines_and_no_warnings(tiny_config_dir, tmp_path):
    p, report = _plan(tiny_config_dir, tmp_path, "--tp", "2")
    lines = p.stderr.splitlines()
    assert lines and all(LINE.match(ln) for ln in lines), p.stderr      # progress only: no warning text
    texts = [LINE.match(ln).group(3) for ln in lines]
    assert texts[0].startswith("starting") and "building the model and sharding it" in texts
    assert any(t.startswith("training") for t in texts)
    assert texts[-2:] == ["writing the report", "done"]
    clocks = [LINE.match(ln).group(2) for ln in lines]
    assert clocks == sorted(clocks, key=lambda c: tuple(map(int, c.split(":"))))   # one clock, re-exec included
    # what would have been streamed is in the report's notes instead
    ops = [n for n in report["notes"] if n["kind"] == "unmodelled op"]
    assert ops and all(n["text"].startswith("aten.") and n["count"] >= 1 for n in ops), ops
    first = ops[0]
    count = "once" if first["count"] == 1 else f"{first['count']:,} times"
    assert "## Notes" in p.stdout and f"`{first['text']}` ({count})" in p.stdout
    # wording at the top: mode and assumptions, plurals
    assert "assumed mode: **eager**" in p.stdout and "(4 ranks, bfloat16, dry run)" in p.stdout


def test_verbose_streams_warnings_and_quiet_shows_no_progress(tiny_config_dir, tmp_path):
    p, _ = _plan(tiny_config_dir, tmp_path, "-v", "--quiet")
    assert "no cost model for aten." in p.stderr              # -v: the warning as it happens
    assert not any(LINE.match(ln) for ln in p.stderr.splitlines())   # --quiet: no progress


def test_overridden_assumptions_are_stated_at_the_top(tiny_config_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_ESTIMATE_ASSUMPTIONS", "eager_launch_s=2e-05")
    p, report = _plan(tiny_config_dir, tmp_path, "--quiet", "--tp", "2", "--mode", "eager", command="generate")
    assert report["assumptions_overridden"] == {"eager_launch_s": 2e-05}
    head = p.stdout.splitlines()[2]
    assert head.startswith("assumed mode: **eager**") and "overridden: eager_launch_s=2e-05" in head
    assert "| output tokens/s (2 replicas) |" in p.stdout


def test_wording():
    from torch_neuronx.plan._wording import number, plural, seconds, size

    assert (plural(1, "replica"), plural(2, "replica"), plural(1024, "rank")) == ("1 replica", "2 replicas", "1,024 ranks")
    assert (number(65148.3), number(1834.0), number(31.8123), number(8190735360)) == ("65,148", "1,834", "31.81", "8,190,735,360")
    assert (seconds(2.0123), seconds(0.0471), seconds(6e-6)) == ("2.012 s", "47.1 ms", "6 us")
    assert (size(23170000000), size(512)) == ("21.58 GiB", "512 B")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux for a real terminal")
def test_terminal_shows_a_live_display_that_leaves_the_report(tiny_config_dir, tmp_path):
    session = f"plan-progress-{uuid.uuid4().hex[:8]}"
    tmux = ["tmux", "-L", session]
    env = " ".join(f"{k}={v}" for k, v in (("PYTHONPATH", os.environ.get("PYTHONPATH", "")),))
    cmd = (f"unset COLUMNS LINES; cd {os.getcwd()} && {env} {sys.executable} -m torch_neuronx.plan train --config {tiny_config_dir} "
           f"--instance trn2.3xlarge --lnc 2 --tp 2 --seq-len 16; echo PLAN-EXITED; sleep 60")
    screens = []
    try:
        subprocess.run(tmux + ["new-session", "-d", "-s", session, "-x", "200", "-y", "40", cmd], check=True)
        subprocess.run(tmux + ["resize-window", "-t", session, "-x", "200", "-y", "40"], capture_output=True)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            screen = subprocess.run(tmux + ["capture-pane", "-p", "-t", session], capture_output=True,
                                    text=True).stdout
            screens.append(screen)
            if "PLAN-EXITED" in screen:
                break
            time.sleep(0.3)
        history = subprocess.run(tmux + ["capture-pane", "-p", "-S", "-", "-t", session], capture_output=True,
                                 text=True).stdout   # the whole terminal, scrolled-off lines included
    finally:
        subprocess.run(tmux + ["kill-server"], capture_output=True)
    live = [s for s in screens if "plan train:" in s]
    assert live, screens[-1]
    assert any(re.search(r"plan train: building the model and sharding it .* 0:00:\d\d", s) for s in live), \
        "\n=====\n".join(live)
    assert any(re.search(r"plan train: training .* step [01] of 2", s) for s in live)
    assert "PLAN-EXITED" in history and "# train:" in history and "## Notes" in history
    # the display made way for the report, and no warning was streamed
    assert "plan train:" not in history and not re.search(r"\d: \w*Warning: ", history), history[-4000:]


def test_compiled_generate_keeps_its_warnings_for_the_notes(tiny_config_dir, tmp_path):
    """transformers' generate asks the backend for mode='reduce-overhead' and ModTracker warns about its
    hierarchy under compile: on the terminal only progress, in the report's notes each once."""
    p, report = _plan(tiny_config_dir, tmp_path, "--tp", "2", "--mode", "eager", "--compile", command="generate")
    texts = [LINE.match(ln).group(3) for ln in p.stderr.splitlines() if LINE.match(ln)]
    assert len(texts) == len(p.stderr.splitlines()), p.stderr          # nothing but progress lines
    assert "Loading weights" not in p.stderr
    assert any(t.startswith("generating: compiling graph") for t in texts)
    assert "generating: 4 tokens in " in " ".join(texts)
    ignored = [n for n in report["notes"] if n["kind"] == "ignored mode"]
    assert len(ignored) == 1 and "mode='reduce-overhead'" in ignored[0]["text"] and ignored[0]["count"] == 1
    assert "assumed mode: **compiled (decode step" in p.stdout and "- ignored (once, UserWarning at" in p.stdout
