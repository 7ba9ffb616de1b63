"""Random numbers on neuron: generators, seeding, Philox-style state."""
import pytest
import torch
import torch.nn.functional as F


def test_manual_seed_governs_neuron_and_every_core():
    torch.manual_seed(7)
    a = torch.randn(8, device="neuron")
    b = torch.rand(8, device="neuron:2")
    torch.manual_seed(7)
    assert torch.equal(a, torch.randn(8, device="neuron"))
    assert torch.equal(b, torch.rand(8, device="neuron:2"))
    # with a fresh seed the first draw equals the CPU's for the same seed
    torch.manual_seed(3)
    assert torch.equal(torch.randn(5, device="neuron").cpu(), torch.randn(5))


def test_successive_draws_differ():
    torch.neuron.manual_seed(0)
    assert not torch.equal(torch.rand(64, device="neuron"), torch.rand(64, device="neuron"))


def test_explicit_generators():
    g = torch.Generator(device="neuron:1")
    assert g.device == torch.device("neuron:1")
    g.manual_seed(11)
    x = torch.randn(16, device="neuron:1", generator=g)
    g.manual_seed(11)
    assert torch.equal(x, torch.randn(16, device="neuron:1", generator=g))
    y = torch.empty(16, device="neuron:1").uniform_(generator=g)
    assert not torch.equal(x, y)
    p = torch.full((32,), 0.5, device="neuron:1")
    assert torch.bernoulli(p, generator=g).is_neuron
    assert torch.randperm(10, device="neuron", generator=torch.Generator("neuron")).sort()[0].tolist() == list(range(10))
    assert torch.multinomial(p, 4, generator=g).is_neuron
    with pytest.raises(RuntimeError, match="generator"):
        torch.randn(3, device="neuron", generator=torch.Generator())


def test_rng_state_is_philox_style():
    torch.neuron.manual_seed(123)
    state = torch.neuron.get_rng_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    seed, offset = state.view(torch.int64).tolist()
    assert (seed, offset) == (123, 0)
    x = torch.rand(10, device="neuron")
    seed2, offset2 = torch.neuron.get_rng_state().view(torch.int64).tolist()
    assert seed2 == 123 and offset2 == 12  # 10 numbers, rounded up to a multiple of 4
    torch.neuron.set_rng_state(state)
    assert torch.equal(x, torch.rand(10, device="neuron"))
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.neuron.set_rng_state(torch.zeros(5, dtype=torch.uint8))
    g = torch.neuron.default_generators[0]
    g.set_offset(4)
    assert g.get_offset() == 4


def test_rng_state_all_and_seed_functions():
    states = torch.neuron.get_rng_state_all()
    assert len(states) == torch.neuron.device_count()
    torch.neuron.seed_all()
    s = torch.neuron.initial_seed()
    assert all(torch.neuron.default_generators[i].initial_seed() == s for i in range(4))
    torch.neuron.set_rng_state_all(states)
    assert torch.equal(torch.neuron.get_rng_state(3), states[3])
    torch.neuron.seed()


def test_dropout_and_fork_rng():
    torch.manual_seed(0)
    d1 = F.dropout(torch.ones(1000, device="neuron"), 0.3)
    assert 0.6 < (d1 != 0).float().mean().item() < 0.8
    with torch.random.fork_rng(device_type="neuron"):
        torch.rand(5, device="neuron")
    torch.manual_seed(0)
    assert torch.equal(d1, F.dropout(torch.ones(1000, device="neuron"), 0.3))


def test_dropout_draws_from_the_neuron_generator():
    # dropout on neuron takes the fused native_dropout (as on CUDA), whose CPU kernel
    # has no generator argument: the neuron RNG state alone must decide the mask
    x = torch.ones(64, 8, device="neuron")
    state = torch.neuron.get_rng_state()
    cpu_state = torch.get_rng_state()
    a = F.dropout(x, 0.5)
    torch.rand(3)  # moves the CPU generator only
    torch.neuron.set_rng_state(state)
    assert torch.equal(a, F.dropout(x, 0.5))
    torch.set_rng_state(cpu_state)
    torch.neuron.manual_seed(123)
    assert not torch.equal(a, F.dropout(x, 0.5))  # and a new neuron seed changes it


def test_native_dropout_matches_cpu_semantics():
    x = torch.randn(6, 5).t()  # transposed: the mask keeps the input's layout
    x_dev = x.to("neuron")
    torch.manual_seed(3)
    cpu = torch.native_dropout(x, 0.3, True)
    torch.manual_seed(3)  # same seed, same first draw on both devices
    dev = torch.native_dropout(x_dev, 0.3, True)
    for c, d in zip(cpu, dev):
        assert d.device.type == "neuron" and d.dtype == c.dtype and d.stride() == c.stride()
        assert torch.equal(c, d.cpu())
    out, mask = torch.native_dropout(torch.ones(4, device="neuron"), 0.3, False)
    assert torch.equal(out.cpu(), torch.ones(4)) and mask.dtype == torch.bool and bool(mask.all())
    assert F.dropout(torch.ones(4, device="neuron"), 1.0).abs().sum().item() == 0
