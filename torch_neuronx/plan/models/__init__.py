"""Model-level plans: `generate`, `train` and `sweep` of a Hugging Face model built from its config.

The model is built on neuron by transformers' own `from_pretrained` path (no weights: `state_dict={}`),
sharded by `DistributedConfig` in a process group of the full world size, and run for real
(`generate()`, forward + backward + AdamW step); the dry run makes that full-size run shape-only,
and `torch_neuronx.estimate` times it. See docs/plan.md.
"""
from ._layout import Layout, LayoutError, make_layout

__all__ = ["Layout", "LayoutError", "make_layout", "plan_generate", "plan_train"]


def __getattr__(name):
    if name == "plan_generate":
        from ._generate import plan_generate

        return plan_generate
    if name == "plan_train":
        from ._train import plan_train

        return plan_train
    raise AttributeError(name)
