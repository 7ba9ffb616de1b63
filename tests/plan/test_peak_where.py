"""The report says where each core's peak falls (phase, step, module), so its breakdown reads right."""
from __future__ import annotations

import torch

from torch_neuronx import plan
from torch_neuronx.plan._report import markdown


def _core(run) -> dict:
    # the core these tests use; others appear when earlier tests in the worker left memory reserved there
    (core,) = [c for c in run.report()["cores"] if c["device"] in (0, "neuron:0")]
    return core


def _train_steps(model, steps: int, batch: int) -> None:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(steps):
        x = torch.ones(batch, 64, device="neuron")
        model(x).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def test_peak_in_a_later_forward_says_so_and_why_gradients_are_zero():
    torch.neuron.empty_cache()
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 256)).to("neuron")
    with plan.dry_run() as run:
        _train_steps(model, steps=1, batch=4)
        with torch.no_grad():   # step 2's forward holds a large activation: the peak
            big = model[0](torch.ones(8192, 64, device="neuron"))
            big = model[1](big)
        del big
    core = _core(run)
    at = core["peak_at"]
    assert (at["phase"], at["step"], at["optimizer_steps_done"]) == ("forward", 2, 1)
    assert at["module"] is not None and at["module"].endswith("1")   # inside the wider second Linear
    assert core["breakdown"]["gradients"] == 0
    text = markdown(run.report())
    assert "peaks in step 2's forward" in text and "zero_grad(set_to_none=True)" in text
    # the merged report of a distributed plan says the same for each rank run
    from torch_neuronx.plan.distributed import _merge as merge

    merged = merge.markdown(merge.merge({0: run.report()}, world_size=1, nnodes=1, nproc_per_node=1))
    assert "rank 0 at its peak: parameters" in merged and "peaks in step 2's forward" in merged


def test_peak_in_the_optimizer_step_and_in_backward():
    torch.neuron.empty_cache()
    # a wide layer and a batch of 1: AdamW's moments (created in step 1) and its temporaries peak
    model = torch.nn.Linear(512, 512).to("neuron")
    with plan.dry_run() as run:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
        model(torch.ones(1, 512, device="neuron")).sum().backward()
        opt.step()
    at = _core(run)["peak_at"]
    assert at["phase"] == "optimizer" and at["step"] == 1 and at["optimizer_steps_done"] == 0
    assert "peaks in step 1's optimizer" in markdown(run.report())

    torch.neuron.empty_cache()
    w = torch.nn.Parameter(torch.ones(256, 1024, device="neuron"))
    with plan.dry_run() as run:
        (w * w).sum().backward()    # backward allocates the gradient while the saved w lives
    at = _core(run)["peak_at"]
    assert at["phase"] == "backward" and at["optimizer_steps_done"] == 0
    assert "peaks in the backward before any optimizer step" in markdown(run.report())


def test_module_to_can_swap_parameters_during_a_dry_run(python_subprocess):
    """The breakdown's registry holds no weak reference to a tensor: module.to() swaps wrapper-subclass
    parameters (TP DTensors) with torch.utils.swap_tensors, which refuses a tensor that has one.
    In a fresh process: in a test worker, memory earlier tests free during the dry run moves its peak."""
    p = python_subprocess("""
        import torch, torch_neuronx
        from torch_neuronx import plan
        with plan.dry_run() as run:
            model = torch.nn.Linear(8, 8)     # its parameters registered while the dry run watches
            torch.__future__.set_swap_module_params_on_conversion(True)
            model.to("neuron")
        (core,) = run.report()["cores"]
        print(model.weight.device.type, core["breakdown"]["parameters"])
    """)
    assert p.returncode == 0, p.stderr[-3000:]
    device, parameters = p.stdout.split()[-2:]
    assert device == "neuron"
    assert int(parameters) > 0    # still found through its module
