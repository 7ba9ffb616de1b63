"""The one wrapping helper: wraps once, keeps the name, and the real adapters are installed once."""
import types

import torch

from torch_neuronx._wrap import is_wrapped, wrap_once


def test_wraps_once_and_keeps_metadata():
    def greet(name):
        """Say hello."""
        return f"hello {name}"

    owner = types.SimpleNamespace(greet=greet)
    calls = []

    def make(original):
        def wrapper(name):
            calls.append(name)
            return original(name).upper()

        return wrapper

    first = wrap_once(owner, "greet", make)
    assert first is owner.greet and is_wrapped(owner.greet)
    assert owner.greet.__name__ == "greet" and owner.greet.__doc__ == "Say hello."
    assert owner.greet.__wrapped__ is greet
    assert wrap_once(owner, "greet", make) is None  # a second install does not wrap the wrapper
    assert owner.greet("ada") == "HELLO ADA" and calls == ["ada"]


def test_a_static_method_stays_static():
    class Table:
        @staticmethod
        def pick(x):
            return x + 1

    wrap_once(Table, "pick", lambda original: lambda x: original(x) * 10)
    assert isinstance(vars(Table)["pick"], staticmethod)
    assert Table.pick(1) == 20 and Table().pick(1) == 20  # no `self` slipped in
    assert wrap_once(Table, "pick", lambda original: lambda x: 0) is None and Table.pick(1) == 20


def test_installed_adapters_are_wrapped_once():
    import safetensors.torch
    import transformers.generation.utils as gen
    import transformers.trainer as trainer

    from torch_neuronx.integrations import generation_compile, safetensors_load, trainer_rng

    before = (gen.GenerationMixin._valid_auto_compile_criteria, trainer.Trainer._save_rng_state,
              trainer.Trainer._load_rng_state, safetensors.torch.load_file)
    assert all(is_wrapped(fn) for fn in before)
    generation_compile.patch(gen)
    trainer_rng.patch(trainer)
    safetensors_load.patch(safetensors.torch)
    after = (gen.GenerationMixin._valid_auto_compile_criteria, trainer.Trainer._save_rng_state,
             trainer.Trainer._load_rng_state, safetensors.torch.load_file)
    assert after == before
    assert not is_wrapped(before[0].__wrapped__)  # the original sits directly under our one wrapper

    import torch.nn.modules.linear_cross_entropy_options as lce

    from torch_neuronx.integrations import linear_cross_entropy

    resolve = lce.LinearCrossEntropyOptions._resolve_auto_acc_dtype
    linear_cross_entropy.patch(lce)
    assert lce.LinearCrossEntropyOptions._resolve_auto_acc_dtype is resolve and is_wrapped(resolve)
    neuron, cpu = torch.device("neuron"), torch.device("cpu")
    assert resolve(torch.bfloat16, neuron) == torch.float32 == resolve(torch.bfloat16, cpu)
    options = lce.LinearCrossEntropyOptions()   # "auto" settings: neuron resolves them as cpu does
    assert (options._adjust(64, 8, 32, torch.bfloat16, neuron).acc_policy
            == options._adjust(64, 8, 32, torch.bfloat16, cpu).acc_policy)

