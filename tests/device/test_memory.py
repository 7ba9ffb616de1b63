"""Device memory: real storage semantics, exact statistics, enforced HBM."""
import gc

import pytest
import torch

from tests.conftest import run_python


def test_storage_semantics():
    x = torch.arange(12.0, device="neuron")
    v = x.view(3, 4)
    assert v.data_ptr() == x.data_ptr() and v.untyped_storage().data_ptr() == x.data_ptr()
    v[1].fill_(-1)  # in-place through a view reaches the base
    assert x[4:8].cpu().tolist() == [-1.0] * 4
    t = v.t()
    assert t._base is x or t.data_ptr() == x.data_ptr()
    u = x.unfold(0, 4, 2)  # a view produced by a host kernel stays a view
    assert u.data_ptr() == x.data_ptr()
    x.zero_()
    assert u.sum().item() == 0
    y = torch.empty(0, device="neuron")
    torch.mul(torch.ones(5, device="neuron"), 3, out=y)  # out= resizes
    assert y.shape == (5,) and y.device.type == "neuron" and y.cpu().tolist() == [3.0] * 5
    z = torch.ones(2, device="neuron")
    z.resize_(6)
    assert z.shape == (6,) and z[:2].cpu().tolist() == [1.0, 1.0]
    w = torch.empty(0, device="neuron").set_(x.untyped_storage(), 2, (3,), (1,))
    assert w.data_ptr() == x.data_ptr() + 8
    shared = torch.empty(0, device="neuron").set_(x)
    shared.add_(5)
    assert x.cpu().eq(5).all()


def test_storage_resize_to_zero_and_back_like_fsdp2():
    p = torch.randn(1024, device="neuron")  # 4 KiB: a size class, so allocated == requested
    before = torch.neuron.memory_allocated()
    storage = p.untyped_storage()
    n = storage.size()
    storage.resize_(0)
    assert torch.neuron.memory_allocated() == before - n
    storage.resize_(n)
    assert torch.neuron.memory_allocated() == before
    p.copy_(torch.ones(1024))
    assert p.sum().item() == 1024


def _counters(core):
    stats = torch.neuron.memory_stats(core)
    return (torch.neuron.memory_allocated(core), torch.neuron.memory_reserved(core),
            torch.neuron.max_memory_allocated(core), stats["allocation.all.allocated"],
            stats["allocated_bytes.all.allocated"])


def test_statistics_are_exact_and_per_core():
    gc.collect()
    torch.neuron.reset_peak_memory_stats(2)
    base = torch.neuron.memory_allocated(2)
    other_core = _counters(3)
    a = torch.empty(1 << 20, dtype=torch.uint8, device="neuron:2")
    assert torch.neuron.memory_allocated(2) == base + (1 << 20)
    assert torch.neuron.memory_reserved(2) >= torch.neuron.memory_allocated(2)
    b = a.float()  # produced by a host kernel: adopted, still counted
    assert torch.neuron.memory_allocated(2) == base + 5 * (1 << 20)
    assert _counters(3) == other_core  # core 2's tensors leave core 3's counters alone
    peak = torch.neuron.max_memory_allocated(2)
    assert peak == base + 5 * (1 << 20)
    del a, b
    assert torch.neuron.memory_allocated(2) == base
    assert torch.neuron.max_memory_allocated(2) == peak
    torch.neuron.reset_peak_memory_stats(2)
    assert torch.neuron.max_memory_allocated(2) == base
    stats = torch.neuron.memory_stats(2)
    assert stats["allocated_bytes.all.current"] == base
    assert stats["allocation.all.allocated"] >= 2
    free, total = torch.neuron.mem_get_info(2)
    assert total == 24 * 2**30 and free == total - torch.neuron.memory_reserved(2)
    assert _counters(3) == other_core
    torch.neuron.empty_cache()  # returns every core's wholly free cached segments, as torch.cuda's does
    assert "Allocated memory" in torch.neuron.memory_summary(2)


def test_a_host_kernels_scratch_is_not_device_memory():
    # A CPU kernel's own temporaries (bf16 mm converts its inputs to fp32 on this host; a bf16 mean
    # accumulates in fp32) are the host's business: a NeuronCore has no such HBM allocations and a
    # dry run, which runs no host kernel, never sees them. Only the op's result is counted, so the
    # peak and the memory history do not depend on which host CPU ran the test.
    gc.collect()
    a = torch.randn(32, 64, device="neuron:1", dtype=torch.bfloat16)
    b = torch.randn(128, 64, device="neuron:1", dtype=torch.bfloat16)
    torch.neuron.memory._record_memory_history(max_entries=1000)
    try:
        for op, result_bytes in ((lambda: a @ b.t(), 32 * 128 * 2), (lambda: a.t() @ a, 64 * 64 * 2),
                                 (lambda: a.mean(-1, keepdim=True), 256)):   # 64 B in a 256 B block
            torch.neuron.reset_peak_memory_stats(1)
            base = torch.neuron.memory_allocated(1)
            out = op()
            assert torch.neuron.memory_allocated(1) == base + result_bytes
            assert torch.neuron.max_memory_allocated(1) == base + result_bytes
            del out
            assert torch.neuron.memory_allocated(1) == base
        trace = torch.neuron.memory._snapshot()["device_traces"][1]
    finally:
        torch.neuron.memory._record_memory_history(enabled=None)
    allocs = sorted(e["size"] for e in trace if e["action"] == "alloc")
    assert allocs == sorted([32 * 128 * 2, 64 * 64 * 2, 256]), allocs   # the results only, each once
    assert sum(e["action"] == "free_completed" for e in trace) == 3


def test_hbm_capacity_enforced_and_tensors_intact():
    r = run_python("""
        import torch
        keep = torch.arange(1000.0, device="neuron")
        try:
            torch.empty(300 << 20, dtype=torch.uint8, device="neuron")
        except torch.OutOfMemoryError as e:
            msg = str(e)
            print("OOM", "neuron:0" in msg, str(300 << 20) in msg, str(256 << 20) in msg,
                  str(4000) in msg)
        print(keep.sum().item(), torch.neuron.memory_stats()["num_ooms"])
        a = torch.empty(200 << 20, dtype=torch.uint8, device="neuron")
        try:
            a.float()  # a fresh host-kernel result beyond capacity
        except torch.OutOfMemoryError:
            print("OOM2")
        del a
        b = torch.empty(200 << 20, dtype=torch.uint8, device="neuron:1")  # other core unaffected
        print("ok", keep.sum().item())
    """, env={"TORCH_NEURONX_HBM_BYTES_PER_CORE": "256MiB"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "OOM True True True True"
    assert lines[1] == "499500.0 1"
    assert lines[2] == "OOM2"
    assert lines[3] == "ok 499500.0"


def test_pin_memory():
    p = torch.arange(4.0).pin_memory()
    assert p.is_pinned() and not torch.arange(4.0).is_pinned()
    n = p.to("neuron", non_blocking=True)
    assert n.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
