"""The Neuron tools of the virtual NeuronCore: neuron-ls, neuron-top, neuron-monitor.

Each tool is a thin view over one data API (`torch_neuronx.tools.api`) that
scripts and tests use directly:

- `api.registry`: the per-process stats pages every process using the device
  publishes (memory, busy time, op and graph counts), and their reader;
- `api.devices`: the virtual instance (chips, logical cores, torus links);
- `api.host`: host CPU and memory figures from /proc;
- `api.collector`: two samples -> rates (utilisation, FLOP/s).

Run them as `neuron-ls`, `neuron-top`, `neuron-monitor` (console scripts) or
`python -m torch_neuronx.tools.ls` etc.
"""
