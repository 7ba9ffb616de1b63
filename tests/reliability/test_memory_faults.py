"""Memory: past the HBM limit in one tensor and gradually in a training loop,
resize_ past the limit, storage resized to 0 then read, overflowing sizes.
Each failure is a clear exception, and every tensor (including the one that
failed to grow) stays intact and usable. One child with 64 MiB per core."""
from __future__ import annotations

from tests.reliability.hostile import passed, raised, run_cases


def test_out_of_memory_and_inconsistent_storage_raise_and_keep_tensors_intact():
    results = run_cases("""
        import torch
        keep = torch.arange(8, dtype=torch.float32, device="neuron")
        with case("one tensor past HBM"):
            torch.empty(100 * 2**20, dtype=torch.uint8, device="neuron")
        with case("training loop grows past HBM"):
            hoard, model = [], torch.nn.Linear(256, 256).to("neuron")
            for step in range(1000):
                loss = model(torch.randn(64, 256, device="neuron")).sum()
                loss.backward()
                hoard.append(torch.empty(2**20, device="neuron"))  # 4 MiB kept per step: a leak
        with case("after the loop the device still works"):
            del hoard
            assert torch.neuron.memory_allocated() < 8 * 2**20, torch.neuron.memory_allocated()
            assert (model(torch.ones(2, 256, device="neuron")).cpu() ==
                    model.cpu()(torch.ones(2, 256))).all()
        t = torch.arange(6, dtype=torch.float32, device="neuron")
        with case("resize_ past HBM"):
            t.resize_(2**30)
        with case("resize_ past HBM keeps the shape and values"):
            assert t.shape == (6,), t.shape
            assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0], t.tolist()
        with case("resize_ to an overflowing size"):
            t.resize_(2**62, 2**62)
        with case("overflowing resize keeps the shape"):
            assert t.shape == (6,) and t.sum().item() == 15.0
        with case("empty with an overflowing size"):
            torch.empty(2**62, 2**62, device="neuron")
        s = torch.ones(4, 3, device="neuron")
        view = s[1:]
        s.untyped_storage().resize_(0)
        with case("read a tensor whose storage was resized to 0"):
            s.sum()
        with case("print it"):
            str(s)
        with case("read a view of it"):
            view.cpu()
        with case("write into it"):
            s.add_(1)
        with case("grow the storage back and refill it"):
            s.untyped_storage().resize_(4 * 3 * 4)
            s.fill_(2.0)
            assert s.sum().item() == 24.0 and view.sum().item() == 18.0
        with case("other tensors intact"):
            assert keep.tolist() == list(map(float, range(8)))
    """, env={"TORCH_NEURONX_HBM_BYTES_PER_CORE": "64MiB"}, timeout=240)
    raised(results, "one tensor past HBM", "OutOfMemoryError")
    raised(results, "training loop grows past HBM", "OutOfMemoryError")
    passed(results, "after the loop the device still works")
    raised(results, "resize_ past HBM", "OutOfMemoryError")
    passed(results, "resize_ past HBM keeps the shape and values")
    assert results["resize_ to an overflowing size"]["error"] in ("RuntimeError", "OutOfMemoryError")
    passed(results, "overflowing resize keeps the shape")
    assert results["empty with an overflowing size"]["error"] in ("RuntimeError", "OutOfMemoryError")
    for name in ("read a tensor whose storage was resized to 0", "print it", "read a view of it", "write into it"):
        raised(results, name, "RuntimeError", "holds 0 bytes", "untyped_storage().resize_(")
    passed(results, "grow the storage back and refill it")
    passed(results, "other tensors intact")
