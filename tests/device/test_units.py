"""The one formatter for bytes, seconds, numbers and tables (torch_neuronx/runtime/units.py), and the
places a user reads it: torch.neuron.memory_summary and the plan reports."""
import pytest
import torch

from torch_neuronx.runtime import units


@pytest.mark.parametrize("n, text", [
    (0, "0 B"), (512, "512 B"), (1023, "1,023 B"), (1024, "1.00 KiB"), (1536, "1.50 KiB"),
    (1 << 20, "1.00 MiB"), (488 << 20, "488.00 MiB"), (int(21.58 * (1 << 30)), "21.58 GiB"),
    (96 << 30, "96.00 GiB"), (1536 << 30, "1,536.00 GiB"), (-(3 << 20), "-3.00 MiB"), (None, "-"),
])
def test_size_binary_units_with_iec_names(n, text):
    assert units.size(n) == text


def test_size_digits_and_units_are_powers_of_two():
    assert units.size(64 << 10, 0) == "64 KiB"
    assert units.size(4 << 20, 0) == "4 MiB"
    assert units.size(1536, 1) == "1.5 KiB"
    assert units.size(1536, 1, space="") == "1.5KiB" and units.size(0, 1, space="") == "0B"   # neuron-top
    assert (units.KiB, units.MiB, units.GiB) == (1024, 1024 ** 2, 1024 ** 3)


@pytest.mark.parametrize("s, text", [
    (2.0134, "2.013 s"), (1234.5, "1,234.500 s"), (0.0471, "47.1 ms"), (0.04712345, "47.12 ms"), (6e-6, "6 us"),
    (0.0, "0 us"), (None, "-"),
])
def test_seconds(s, text):
    assert units.seconds(s) == text


def test_number_and_plural():
    assert units.number(1024) == "1,024" and units.number(3.14159) == "3.142" and units.number(12345.6) == "12,346"
    assert units.plural(1, "rank") == "1 rank" and units.plural(1024, "rank") == "1,024 ranks"


def test_markdown_table_lines_and_bad_shapes():
    assert units.markdown_table(["kind", "bytes"], [("all_reduce", units.size(1 << 20))], align="lr") == [
        "| kind | bytes |", "|---|---:|", "| all_reduce | 1.00 MiB |"]
    with pytest.raises(ValueError, match="align="):
        units.markdown_table(["a", "b"], [], align="l")
    with pytest.raises(ValueError, match="row has 1 cells"):
        units.markdown_table(["a", "b"], [("x",)])


def test_reports_use_the_one_formatter():
    """The plan's wording and the dry-run merge write what units writes (no formatter of their own)."""
    from torch_neuronx.plan import _wording as wording
    from torch_neuronx.plan.distributed import _merge as merge

    assert wording.size is units.size and wording.seconds is units.seconds and wording.plural is units.plural
    assert merge.size is units.size and merge.seconds is units.seconds


def test_memory_summary_layout_and_units():
    """torch.cuda.memory_summary's layout: 79-column rules, a header row, one row per metric and pool;
    byte cells in binary units."""
    torch.neuron.empty_cache()
    x = torch.empty(3 << 20, dtype=torch.uint8, device="neuron:1")
    text = torch.neuron.memory_summary(1)
    del x
    lines = text.splitlines()
    assert lines[0] == "=" * 79 and lines[2] == "=" * 79 and lines[-1] == "=" * 79
    assert lines[3].split("|")[0].strip() == "Metric"
    assert [c.strip() for c in lines[3].split("|")[1:]] == ["Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed"]
    allocated = next(ln for ln in lines if ln.startswith("Allocated memory"))
    current = allocated.split("|")[1].strip()
    assert current.endswith(("MiB", "GiB")), allocated   # at least the 3 MiB tensor
    assert "KB" not in text and " MB" not in text and " GB" not in text
    assert f"HBM of this logical core: {units.size(torch.neuron.mem_get_info(1)[1])} total" in text
