"""Recurrent layers and cells on neuron equal CPU, forward and backward.

ATen runs LSTM/GRU time steps through the fused cells
(`_thnn_fused_lstm_cell`, `_thnn_fused_gru_cell`) for a PrivateUse1 input;
torch_neuronx/kernels/rnn_cells.py implements them and their backward. RNN
and RNNCell take ATen's unfused path and are covered for completeness.
"""
import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

TOL = dict(rtol=1e-5, atol=1e-5)


def _grads(module, inputs):
    return [p.grad for p in module.parameters()] + [t.grad for t in inputs]


def _compare(make, inputs, forward):
    """Run `forward(module, *inputs)` on CPU and on neuron; compare outputs and all grads."""
    torch.manual_seed(0)
    cpu = make()
    dev = make()
    dev.load_state_dict(cpu.state_dict())
    dev.to("neuron")
    cpu_in = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
    dev_in = [t.to("neuron").requires_grad_(t.is_floating_point()) for t in inputs]
    out_cpu, out_dev = forward(cpu, *cpu_in), forward(dev, *dev_in)
    flat_cpu, flat_dev = torch.utils._pytree.tree_leaves(out_cpu), torch.utils._pytree.tree_leaves(out_dev)
    for a, b in zip(flat_cpu, flat_dev):
        assert b.device.type == "neuron"
        torch.testing.assert_close(b.cpu(), a, **TOL)
    loss_cpu = sum((t.float() * (i + 1)).sum() for i, t in enumerate(flat_cpu))  # every output's grad path
    loss_dev = sum((t.float() * (i + 1)).sum() for i, t in enumerate(flat_dev))
    loss_cpu.backward()
    loss_dev.backward()
    for a, b in zip(_grads(cpu, [t for t in cpu_in if t.requires_grad]),
                    _grads(dev, [t for t in dev_in if t.requires_grad])):
        torch.testing.assert_close(b.cpu(), a, **TOL)


LAYERS = [
    ("lstm", torch.nn.LSTM, {}),
    ("lstm_no_bias_2layer", torch.nn.LSTM, dict(bias=False, num_layers=2)),
    ("lstm_bidir_batch_first", torch.nn.LSTM, dict(bidirectional=True, batch_first=True)),
    ("lstm_proj", torch.nn.LSTM, dict(proj_size=3, num_layers=2, bidirectional=True)),
    ("gru", torch.nn.GRU, {}),
    ("gru_no_bias_bidir_2layer", torch.nn.GRU, dict(bias=False, bidirectional=True, num_layers=2)),
    ("gru_batch_first", torch.nn.GRU, dict(batch_first=True)),
    ("rnn_tanh", torch.nn.RNN, dict(num_layers=2)),
    ("rnn_relu_bidir", torch.nn.RNN, dict(nonlinearity="relu", bidirectional=True)),
]


@pytest.mark.parametrize("name,cls,kw", LAYERS, ids=[n for n, _, _ in LAYERS])
def test_layer_matches_cpu(name, cls, kw):
    torch.manual_seed(1)
    x = torch.randn(2, 5, 4) if kw.get("batch_first") else torch.randn(5, 2, 4)
    _compare(lambda: cls(4, 6, **kw), [x], lambda m, t: m(t))


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU], ids=["lstm", "gru"])
def test_layer_with_initial_state(cls):
    torch.manual_seed(2)
    x, h = torch.randn(4, 3, 4), torch.randn(2, 3, 6)
    if cls is torch.nn.LSTM:
        c = torch.randn(2, 3, 6)
        _compare(lambda: cls(4, 6, num_layers=2), [x, h, c], lambda m, t, h0, c0: m(t, (h0, c0)))
    else:
        _compare(lambda: cls(4, 6, num_layers=2), [x, h], lambda m, t, h0: m(t, h0))


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU], ids=["lstm", "gru"])
def test_packed_sequence(cls):
    torch.manual_seed(3)
    x = torch.randn(5, 3, 4)
    lengths = torch.tensor([5, 3, 2])  # lengths stay on CPU, as PyTorch requires

    def forward(m, t):
        packed = pack_padded_sequence(t, lengths, enforce_sorted=True)
        out, hidden = m(packed)
        padded, out_lengths = pad_packed_sequence(out)
        assert out_lengths.tolist() == lengths.tolist()
        return padded, hidden

    _compare(lambda: cls(4, 6, bidirectional=True), [x], forward)


CELLS = [
    ("lstm_cell", torch.nn.LSTMCell, {}, True),
    ("lstm_cell_no_bias", torch.nn.LSTMCell, dict(bias=False), True),
    ("gru_cell", torch.nn.GRUCell, {}, False),
    ("gru_cell_no_bias", torch.nn.GRUCell, dict(bias=False), False),
    ("rnn_cell", torch.nn.RNNCell, {}, False),
    ("rnn_cell_relu", torch.nn.RNNCell, dict(nonlinearity="relu"), False),
]


@pytest.mark.parametrize("name,cls,kw,two_states", CELLS, ids=[c[0] for c in CELLS])
def test_cell_matches_cpu(name, cls, kw, two_states):
    torch.manual_seed(4)
    x, h = torch.randn(3, 4), torch.randn(3, 6)
    if two_states:
        c = torch.randn(3, 6)
        _compare(lambda: cls(4, 6, **kw), [x, h, c], lambda m, t, h0, c0: m(t, (h0, c0)))
    else:
        _compare(lambda: cls(4, 6, **kw), [x, h], lambda m, t, h0: m(t, h0))
    _compare(lambda: cls(4, 6, **kw), [x], lambda m, t: m(t))  # zero initial state
    _compare(lambda: cls(4, 6, **kw), [x[0]], lambda m, t: m(t))  # unbatched


def test_cell_backward_of_one_output_only():
    """Only cy feeds the loss: the LSTM backward kernel gets no grad for hy."""
    torch.manual_seed(5)
    x, h, c = torch.randn(3, 4), torch.randn(3, 6), torch.randn(3, 6)
    _compare(lambda: torch.nn.LSTMCell(4, 6), [x, h, c], lambda m, t, h0, c0: m(t, (h0, c0))[1])
    _compare(lambda: torch.nn.LSTMCell(4, 6), [x, h, c], lambda m, t, h0, c0: m(t, (h0, c0))[0])


def test_double_backward_matches_cpu():
    torch.manual_seed(6)
    x = torch.randn(3, 2, 4)
    results = []
    for device in ("cpu", "neuron"):
        torch.manual_seed(0)
        m = torch.nn.LSTM(4, 5).to(device)
        t = x.to(device).requires_grad_()
        out, _ = m(t)
        (g,) = torch.autograd.grad(out.pow(2).sum(), t, create_graph=True)
        g.sum().backward()
        results.append((g.detach().cpu(), m.weight_ih_l0.grad.cpu()))
    for a, b in zip(*results):
        torch.testing.assert_close(b, a, **TOL)


def test_bf16_lstm_close_to_cpu():
    torch.manual_seed(7)
    x = torch.randn(4, 2, 8, dtype=torch.bfloat16)
    m = torch.nn.LSTM(8, 8).to(torch.bfloat16)
    ref, _ = m(x)
    out, _ = m.to("neuron")(x.to("neuron"))
    torch.testing.assert_close(out.cpu(), ref, rtol=2e-2, atol=2e-2)


def test_fused_kernels_are_the_neuron_path():
    """The layers really go through the fused-cell kernels (the reason this file exists)."""
    from torch.profiler import profile

    m = torch.nn.GRU(4, 6).to("neuron")
    with profile() as prof:
        m(torch.randn(3, 2, 4, device="neuron"))[0].sum().backward()
    names = {e.name for e in prof.events()}
    assert "aten::_thnn_fused_gru_cell" in names and "aten::_thnn_fused_gru_cell_backward" in names


# ---- bad input: the errors CUDA gives ---------------------------------------------------------

def test_hidden_state_on_another_device():
    m = torch.nn.LSTM(4, 6).to("neuron")
    x = torch.randn(3, 2, 4, device="neuron")
    with pytest.raises(RuntimeError, match="Input and hidden tensors are not at the same device"):
        m(x, (torch.zeros(1, 2, 6), torch.zeros(1, 2, 6, device="neuron")))
    with pytest.raises(RuntimeError, match="not at the same device.*neuron:1"):
        m(x, (torch.zeros(1, 2, 6, device="neuron:1"),) * 2)
    cell = torch.nn.GRUCell(4, 6).to("neuron")
    with pytest.raises(RuntimeError, match="same device"):
        cell(x[0], torch.zeros(2, 6))


def test_hidden_state_of_wrong_shape():
    m = torch.nn.GRU(4, 6).to("neuron")
    x = torch.randn(3, 2, 4, device="neuron")
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 2, 6\), got \[1, 3, 6\]"):
        m(x, torch.zeros(1, 3, 6, device="neuron"))
    cell = torch.nn.LSTMCell(4, 6).to("neuron")
    with pytest.raises(RuntimeError, match="hidden0 has inconsistent hidden_size: got 7, expected 6"):
        cell(x[0], (torch.zeros(2, 7, device="neuron"), torch.zeros(2, 6, device="neuron")))


def test_fused_cell_op_checks_its_arguments():
    dev = dict(device="neuron")
    op = torch.ops.aten._thnn_fused_lstm_cell
    with pytest.raises(RuntimeError, match="'input_gates' to have the same size as tensor for argument #2"):
        op(torch.zeros(2, 8, **dev), torch.zeros(2, 4, **dev), torch.zeros(2, 2, **dev))
    with pytest.raises(RuntimeError, match="'prev_hidden' of shape \\[2, 2\\]"):
        op(torch.zeros(2, 8, **dev), torch.zeros(2, 8, **dev), torch.zeros(2, 3, **dev))
    with pytest.raises(RuntimeError, match="'input_bias'"):
        torch.ops.aten._thnn_fused_gru_cell(torch.zeros(2, 6, **dev), torch.zeros(2, 6, **dev),
                                            torch.zeros(2, 2, **dev), torch.zeros(5, **dev),
                                            torch.zeros(5, **dev))
