"""torch.save / torch.load of neuron tensors and state dicts."""
import torch
import torch.nn as nn


def test_save_load_tensor_and_map_location(tmp_path):
    x = torch.randn(3, 4).to("neuron:1")
    path = tmp_path / "x.pt"
    torch.save({"x": x, "view": x[1]}, path)
    loaded = torch.load(path)
    assert loaded["x"].device == torch.device("neuron:1") and torch.equal(loaded["x"].cpu(), x.cpu())
    assert loaded["view"].data_ptr() == loaded["x"].data_ptr() + 16  # storage sharing survives
    cpu = torch.load(path, map_location="cpu")
    assert cpu["x"].device.type == "cpu" and torch.equal(cpu["x"], x.cpu())
    moved = torch.load(path, map_location="neuron:3")
    assert moved["x"].device == torch.device("neuron:3")


def test_state_dict_roundtrip(tmp_path):
    model = nn.Linear(4, 2).neuron()
    torch.save(model.state_dict(), tmp_path / "m.pt")
    fresh = nn.Linear(4, 2)
    fresh.load_state_dict(torch.load(tmp_path / "m.pt", map_location="cpu"))
    assert torch.equal(fresh.weight, model.weight.cpu())
    twin = nn.Linear(4, 2).neuron()
    twin.load_state_dict(torch.load(tmp_path / "m.pt", map_location="neuron"))
    assert torch.equal(twin.weight.cpu(), model.weight.cpu())
