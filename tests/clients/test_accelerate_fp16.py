"""In-process: `Accelerator(mixed_precision="fp16")` on neuron is CUDA's fp16 AMP.

The prepared model's forward autocasts to fp16 and `backward`/`step` go through a neuron GradScaler
(skipping the overflowing first step and halving the scale, as GradScaler does on CUDA). Reference: the
same loop written by hand on CPU with `torch.autocast("cpu", torch.float16)` and `torch.amp.GradScaler("cpu")`.
"""
from __future__ import annotations

import pytest
import torch


@pytest.fixture
def fresh_accelerate_state():
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(True)
    yield
    AcceleratorState._reset_state(True)


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))


X = torch.linspace(-2, 2, 32).reshape(8, 4)
STEPS = 4
LOSS_SCALE, LR = 10.0, 0.01  # scaled fp16 gradients overflow in steps 1-3 (skipped, scale halved), step 4 trains


def _cpu_reference():
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    scaler = torch.amp.GradScaler("cpu")
    for _ in range(STEPS):
        with torch.autocast("cpu", dtype=torch.float16):
            out = model(X)
        scaler.scale(out.float().pow(2).mean() * LOSS_SCALE).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
    return [p.detach() for p in model.parameters()], scaler.get_scale()


def test_fp16_autocast_and_grad_scaler_like_cpu_amp(fresh_accelerate_state):
    from accelerate import Accelerator

    accelerator = Accelerator(mixed_precision="fp16")
    assert accelerator.device.type == "neuron" and accelerator.mixed_precision == "fp16"
    assert accelerator.native_amp and isinstance(accelerator.scaler, torch.amp.GradScaler)
    assert accelerator.scaler._device == "neuron" and accelerator.scaler.is_enabled()

    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    model, optimizer = accelerator.prepare(model, optimizer)
    seen = []
    model[0].register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    for _ in range(STEPS):
        accelerator.backward(model(X.to(accelerator.device)).float().pow(2).mean() * LOSS_SCALE)
        optimizer.step()
        optimizer.zero_grad()
    assert seen == [torch.float16] * STEPS  # autocast inside the prepared forward

    weights, scale = _cpu_reference()
    assert accelerator.scaler.get_scale() == scale < 65536.0  # the same skipped (overflowing) steps
    moved = max((w - p0).abs().max().item() for w, p0 in zip(weights, _model().parameters()))
    assert moved > 1e-3, "the reference did not train: the check below would be vacuous"
    for got, want in zip(model.parameters(), weights):
        torch.testing.assert_close(got.detach().cpu(), want, atol=1e-3, rtol=1e-3)


def test_other_precisions_untouched(fresh_accelerate_state):
    from accelerate import Accelerator

    accelerator = Accelerator(mixed_precision="no")
    assert accelerator.scaler is None and not accelerator.native_amp and accelerator.mixed_precision == "no"
