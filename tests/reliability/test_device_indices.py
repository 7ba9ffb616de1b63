"""Device indices: negative, huge, past the count, strings, other types. Every
torch.neuron entry point checks the index at full width in Python (c10's
DeviceIndex is 8-bit: 256 would select core 0, 128 would read -128), and the
error repeats what the caller passed. One child runs every case."""
from __future__ import annotations

from tests.reliability.hostile import passed, raised, run_cases

BAD = [256, 128, 260, 4, -1, -129, 2**70, "neuron:256", "neuron:128", "neuron:-1", "neuron:x", "cuda:0", 1.5, True]
APIS = ["set_device", "get_device_properties", "get_device_name", "synchronize", "memory_allocated",
        "mem_get_info", "get_rng_state", "device", "current_stream", "Stream"]


def test_every_api_rejects_every_bad_index_and_repeats_it():
    results = run_cases(f"""
        import torch
        for api in {APIS!r}:
            for bad in {BAD!r}:
                with case(f"{{api}}({{bad!r}})"):
                    fn = getattr(torch.neuron, api)
                    if api == "get_rng_state":
                        fn(device=bad)
                    else:
                        fn(bad)
                    with torch.neuron.device(bad) if api == "device" else contextlib.nullcontext():
                        pass
        with case("still on neuron:0"):
            assert torch.neuron.current_device() == 0, torch.neuron.current_device()
            assert torch.ones(2, device="neuron").device == torch.device("neuron:0")
        with case("valid indices work"):
            torch.neuron.set_device("neuron:3"); assert torch.neuron.current_device() == 3
            torch.neuron.set_device(torch.device("neuron", 1)); assert torch.neuron.current_device() == 1
            assert torch.neuron.get_device_properties(2).logical_core_index == 2
            torch.neuron.set_device(0)
    """, env={"TORCH_NEURONX_INSTANCE_TYPE": "trn2.3xlarge"})
    for api in APIS:
        for bad in (256, 128, 260, 4, 2**70, "neuron:256", "neuron:128"):
            raised(results, f"{api}({bad!r})", "RuntimeError", "invalid device ordinal", repr(bad),
                   "this process sees 4 NeuronCore(s)")
        for bad in (-1, -129, "neuron:-1"):
            raised(results, f"{api}({bad!r})", "ValueError", repr(bad), ">= 0")
        raised(results, f"{api}('neuron:x')", "ValueError", "'neuron:x'")
        raised(results, f"{api}('cuda:0')", "ValueError", "Expected a neuron device", "'cuda:0'")
        raised(results, f"{api}(1.5)", "TypeError", "float", "1.5")
        raised(results, f"{api}(True)", "TypeError", "bool")
    passed(results, "still on neuron:0")
    passed(results, "valid indices work")
