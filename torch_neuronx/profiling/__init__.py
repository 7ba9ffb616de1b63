"""torch.profiler on neuron, with TorchNeuron's `torch_neuronx.profiling` names.

Profile as on TorchNeuron::

    from torch.profiler import profile, ProfilerActivity
    from torch_neuronx.profiling import NeuronConfig, ProfileMode, NeuronProfiler

    cfg = NeuronConfig(modes=[ProfileMode.DEVICE], profile_output_dir="./profile")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                 experimental_config=cfg, on_trace_ready=NeuronProfiler(cfg).export_trace):
        step()

The CPU track holds the measured host times; with `ProfilerActivity.PrivateUse1`
each logical core used gets a device track of estimated Trainium times
(`_device_track.py`, built by csrc/profiler.cpp). See docs/profiling.md.

Public (``__all__``): ``NeuronConfig``, ``ProfileMode``, ``NeuronProfiler``. The modules config,
device_track, timeline and trace_file are internal (the tools and tests read them).
"""
from ._config import NeuronConfig, NeuronProfiler, ProfileMode

__all__ = ["NeuronConfig", "NeuronProfiler", "ProfileMode"]
