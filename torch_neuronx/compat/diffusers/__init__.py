"""Diffusers on neuron: tiny offline pipelines and the pipelines compatibility suite.

    python -m torch_neuronx.compat.diffusers [--pipelines flux,sd3] [--no-compile] [--out docs/diffusers-compat-report]

Modules: `tiny_qwenimage21` (the tiny Qwen-Image-2.1 pipeline and its text-only processor stand-in, used by
examples/qwen_image_tp.py), `specs` (tiny configs of 21 pipelines), `runner` (CPU vs neuron eager vs neuron
compiled for one pipeline), `report` (markdown and JSON).
"""
