"""fp8 E4M3: the torch side's Neuron E4M3 (trainium mode) agrees with the NKI
simulator's trn2 float8_e4m3 store: same values inside +-240, non-finite beyond
(the simulator stores IEEE inf, torch's e4m3fn has no inf: NaN)."""
import numpy as np
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from torch_neuronx.numerics import fp8


def _store_as(dtype):
    def kernel(a):
        out = nl.ndarray(a.shape, dtype, buffer=nl.shared_hbm)
        c = nl.ndarray(a.shape, dtype, buffer=nl.sbuf)
        nisa.tensor_copy(c, nl.load(a))   # the engine write rounds to the destination dtype
        nl.store(out, c)
        return out
    return kernel


def _values() -> np.ndarray:
    codes = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
    codes = codes[torch.isfinite(codes)]
    grid = torch.cat([codes, (codes[:-1] + codes[1:]) / 2, torch.linspace(-600, 600, 97)])
    return grid.numpy().astype(np.float32).reshape(1, -1)


def test_torch_e4m3_matches_nki_simulator():
    x = _values()
    assert fp8.NEURON_E4M3_MAX == 240.0
    simulated = nki.simulate(_store_as(nl.float8_e4m3))(x).astype(np.float32)
    t = torch.from_numpy(x).to("neuron").to(torch.float8_e4m3fn)
    fp8.emulate([t], "nan")
    ours = t.float().cpu().numpy()
    finite = np.isfinite(simulated)
    assert finite.sum() > 200 and (~finite).sum() > 40
    np.testing.assert_array_equal(ours[finite], simulated[finite])
    assert np.isnan(ours[~finite]).all()
    # the one fact both sides share: everything the simulator keeps finite is within +-240
    assert np.abs(simulated[finite]).max() == 240.0


def test_saturate_setting_clamps():
    t = torch.tensor([300.0, -1000.0, 18.0], device="neuron").to(torch.float8_e4m3fn)
    fp8.emulate([t], "saturate")
    assert t.float().cpu().tolist() == [240.0, -240.0, 18.0]
