"""`python -m torch_neuronx.plan serve`: a vLLM deployment planned with vLLM's own scheduler and engine
loop on a simulated clock, each step charged the estimated time of its compiled graphs (_cli.py)."""
