"""Faults: mismatches are reported, a dead peer or a wrong world size fails
within the group timeout instead of hanging, destroy releases the group and
its transport threads, and so does interpreter exit."""
from __future__ import annotations

import os
import sys
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

from tests.conftest import run_python
from tests.distributed.dist_harness import run_ranks

SHORT = timedelta(seconds=10)


def _mismatch(rank, world):
    dev = torch.device("neuron", rank)
    with pytest.raises(RuntimeError, match="mismatch between collectives") as shapes:
        dist.all_reduce(torch.ones(4 if rank == 0 else 8, device=dev))
    with pytest.raises(RuntimeError, match="mismatch between collectives") as dtypes:
        dist.all_reduce(torch.ones(4, device=dev, dtype=torch.float32 if rank == 0 else torch.int32))
    with pytest.raises(RuntimeError, match="mismatch between collectives"):
        out = torch.empty(2 * (3 if rank == 0 else 5), device=dev)
        dist.all_gather_into_tensor(out, torch.ones(3 if rank == 0 else 5, device=dev))
    # the group is still usable: no data moved, nobody aborted
    t = torch.full((3,), float(rank + 1), device=dev)
    dist.all_reduce(t)
    assert t.tolist() == [3.0, 3.0, 3.0]
    return str(shapes.value), str(dtypes.value)


def _run_with_default_checks(monkeypatch, fn):
    """Runs ``fn`` on 2 ranks without any debug setting (gloo alone would abort the receiving
    rank): the default collective checks must name the mismatch."""
    monkeypatch.delenv("TORCH_DISTRIBUTED_DEBUG", raising=False)
    monkeypatch.delenv("TORCH_NEURONX_COLLECTIVE_CHECKS", raising=False)
    run_ranks(fn, 2, pg_timeout=SHORT)


def _mismatch_default(rank, world):
    shapes, dtypes = _mismatch(rank, world)
    # our own check (default): names every rank's call
    assert "rank 0: all_reduce(SUM) [float32[4]]" in shapes and "rank 1: all_reduce(SUM) [float32[8]]" in shapes
    assert "rank 1: all_reduce(SUM) [int32[4]]" in dtypes
    assert "TORCH_NEURONX_COLLECTIVE_CHECKS" in shapes


def test_mismatched_shapes_and_dtypes_give_clear_error_by_default(monkeypatch):
    _run_with_default_checks(monkeypatch, _mismatch_default)


def _mismatch_after_many_calls(rank, world):
    dev = torch.device("neuron", rank)
    for _ in range(80):  # the check covers a group's whole life, not a first window
        dist.all_reduce(torch.ones(2, device=dev))
    with pytest.raises(RuntimeError, match="mismatch between collectives") as late:
        dist.broadcast(torch.ones(2 if rank == 0 else 3, device=dev), src=0)
    assert "call #81" in str(late.value), str(late.value)
    # ranks calling collectives in different orders
    with pytest.raises(RuntimeError, match="mismatch between collectives") as order:
        if rank == 0:
            dist.all_reduce(torch.ones(2, device=dev))
        else:
            dist.all_gather_into_tensor(torch.empty(4, device=dev), torch.ones(2, device=dev))
    assert "rank 0: all_reduce(SUM)" in str(order.value) and "rank 1: all_gather_into_tensor" in str(order.value)
    t = torch.ones(2, device=dev)
    dist.all_reduce(t)
    assert t.tolist() == [2.0, 2.0]


def test_mismatch_late_in_a_group_is_caught_by_default(monkeypatch):
    _run_with_default_checks(monkeypatch, _mismatch_after_many_calls)


def _p2p_mismatch(rank, world):
    dev = torch.device("neuron", rank)
    peer = 1 - rank
    # a send of 10 matched by a recv into 4: gloo alone aborts the receiver
    if rank == 0:
        dist.send(torch.arange(10.0, device=dev), dst=1)
    else:
        box = torch.full((4,), -1.0, device=dev)
        with pytest.raises(RuntimeError, match="send/recv mismatch") as err:
            dist.recv(box, src=0)
        assert "rank 0 sent float32[10]" in str(err.value) and "expects float32[4]" in str(err.value)
        assert box.tolist() == [-1.0] * 4  # left unchanged
    # a smaller send and a dtype change are caught too, then the pair still works
    if rank == 0:
        dist.send(torch.ones(2, device=dev), dst=1)
        dist.send(torch.ones(3, device=dev, dtype=torch.int32), dst=1)
    else:
        with pytest.raises(RuntimeError, match="send/recv mismatch"):
            dist.recv(torch.empty(5, device=dev), src=0)
        with pytest.raises(RuntimeError, match=r"sent int32\[3\]"):
            dist.recv(torch.empty(3, device=dev), src=0)
    # both ranks wait on their send before their recv: progresses as with plain gloo
    out = torch.empty(3, device=dev)
    r = dist.irecv(out, src=peer)
    s = dist.isend(torch.full((3,), float(rank), device=dev), dst=peer)
    s.wait()
    r.wait()
    assert out.tolist() == [float(peer)] * 3
    # batched, and from any source
    got = torch.empty(2, device=dev)
    ops = [dist.P2POp(dist.isend, torch.full((2,), rank + 5.0, device=dev), peer),
           dist.P2POp(dist.irecv, got, peer)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    assert got.tolist() == [peer + 5.0] * 2
    if rank == 0:
        dist.send(torch.ones(2, device=dev), dst=1)
    else:
        anywhere = torch.empty(2, device=dev)
        assert dist.recv(anywhere) == 0 and anywhere.tolist() == [1.0, 1.0]


def test_send_recv_mismatch_gives_clear_error(monkeypatch):
    _run_with_default_checks(monkeypatch, _p2p_mismatch)


def test_mismatched_shapes_and_dtypes_give_clear_error_with_debug_detail(monkeypatch):
    # TORCH_DISTRIBUTED_DEBUG=DETAIL: torch's own wrapper checks op, shapes and
    # dtypes before each collective, as for its own backends (spawned ranks inherit it).
    monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL")
    run_ranks(_mismatch, 2, pg_timeout=SHORT)


def test_bad_collective_checks_value_names_the_variable():
    r = run_python("""
        import socket, datetime, torch, torch.distributed as dist
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        try:
            dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1,
                                    timeout=datetime.timedelta(seconds=5))
        except Exception as e:
            print("ERR", type(e).__name__, e)
    """, env={"TORCH_NEURONX_COLLECTIVE_CHECKS": "sometimes"}, timeout=60)
    assert "ERR ValueError TORCH_NEURONX_COLLECTIVE_CHECKS='sometimes' is not valid" in r.stdout, r.stdout + r.stderr


def _dead_peer(rank, world):
    dev = torch.device("neuron", rank)
    dist.barrier()
    if rank == 1:
        os._exit(0)  # dies without leaving the group
    start = time.monotonic()
    with pytest.raises(RuntimeError):
        for _ in range(3):
            dist.all_reduce(torch.ones(4, device=dev))
            time.sleep(0.5)
    assert time.monotonic() - start < SHORT.total_seconds() + 5


def test_dead_rank_fails_others_within_timeout():
    run_ranks(_dead_peer, 2, pg_timeout=SHORT)


def test_wrong_world_size_times_out_with_clear_error():
    r = run_python("""
        import socket, time, datetime, torch, torch.distributed as dist
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        start = time.monotonic()
        try:
            dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}", rank=0,
                                    world_size=2, timeout=datetime.timedelta(seconds=3))
            print("NO ERROR")
        except Exception as e:
            print(type(e).__name__, round(time.monotonic() - start), str(e).splitlines()[0][:200])
    """, timeout=120)
    assert r.returncode == 0, r.stderr
    kind, seconds, message = r.stdout.split(" ", 2)
    assert kind in ("DistStoreError", "RuntimeError", "TimeoutError"), r.stdout
    assert int(seconds) < 30
    assert "timeout" in message.lower() or "timed out" in message.lower(), message


_THREAD_NAMES = """
        import os
        def transport_threads():
            # gloo's worker and I/O threads, by the names gloo gives them
            names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
            return sum(n.startswith(("pt_gloo", "gloo_")) for n in names)
"""


def test_destroy_releases_and_reinit_works():
    r = run_python(_THREAD_NAMES + """
        import gc, socket, weakref, datetime, torch, torch.distributed as dist
        def port():
            s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
        for i in range(2):
            dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port()}", rank=0,
                                    world_size=1, timeout=datetime.timedelta(seconds=10))
            pg = dist.group.WORLD
            sub = dist.new_group([0])
            t = torch.ones(3, device="neuron")
            dist.all_reduce(t, group=sub)
            assert transport_threads() > 0
            dist.destroy_process_group()
            # the transports are gone (their worker threads joined) while we still hold the groups
            print("threads", transport_threads())
            try:
                sub.allreduce([t])
            except RuntimeError as e:
                print("closed" if "was shut down" in str(e) and "new_group" in str(e) else e)
            assert not dist.is_initialized()
            ref = weakref.ref(pg); del pg, sub; gc.collect()
            print("released" if ref() is None else "alive")
    """, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["threads", "0", "closed", "released"] * 2, r.stdout


def test_groups_left_alive_are_shut_down_before_interpreter_finalization():
    # No destroy_process_group: the exit hook joins the transports while the interpreter is alive, so no
    # transport thread can take the GIL during finalization (which aborts the process).
    r = run_python(_THREAD_NAMES + """
        import atexit, socket, datetime, torch, torch.distributed as dist
        # registered before the group, so it runs after torch_neuronx's exit hook (atexit is last-in first-out)
        atexit.register(lambda: print("at exit", transport_threads(), flush=True))
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1,
                                timeout=datetime.timedelta(seconds=10))
        sub = dist.new_group([0])
        t = torch.ones(3, device="neuron", requires_grad=True)
        (t * 2).sum().backward()
        dist.all_reduce(t.grad, group=sub)
        print("running", transport_threads() > 0)
    """, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["running", "True", "at", "exit", "0"], r.stdout


def test_abort_closes_the_group_without_joining_its_threads():
    # abort must not block on a worker that may be stuck, so its threads stay; the group is closed all the same
    r = run_python(_THREAD_NAMES + """
        import socket, datetime, torch, torch.distributed as dist
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1,
                                timeout=datetime.timedelta(seconds=10))
        t = torch.ones(3, device="neuron")
        dist.all_reduce(t)
        pg = dist.group.WORLD
        pg.abort()
        print("threads kept", transport_threads() > 0)
        try:
            pg.allreduce([t])
        except RuntimeError as e:
            print("closed" if "was shut down" in str(e) else e)
    """, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["threads", "kept", "True", "closed"], r.stdout

def _abort_rank_one(rank, world):
    if rank == 1:
        print("rank one is about to abort", file=sys.stderr, flush=True)
        os.abort()


def test_a_rank_killed_by_a_signal_fails_with_its_stderr():
    # the harness's own diagnostics: the failure names the rank, the signal and what the rank printed,
    # including faulthandler's Python stacks
    with pytest.raises(RuntimeError) as info:
        run_ranks(_abort_rank_one, 2, pg_timeout=SHORT)
    message = str(info.value)
    assert "rank 1 died" in message and "SIGABRT" in message, message
    assert "rank one is about to abort" in message and "Fatal Python error: Aborted" in message, message
