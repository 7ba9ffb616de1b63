"""How the suite's tests are shared between the xdist workers (tests/conftest.py installs both hooks).

Two rules, for CI's two workers:

- A test file is one unit of work, run whole by one worker, so the module- and session-scoped fixtures
  its tests share (SFT runs, torchrun launches, tiny models) are built once, not once per worker. Plain
  `--dist load` hands out consecutive tests and often split a file between the workers, who then both
  built its fixtures. Only the sweeps below, hundreds of short independent tests, go out one test at a time.
- The longest files start first and the short ones fill in at the end (longest-processing-time-first),
  so no worker is left with a long test while the other is idle. `--dist loadgroup` without an order
  made one worker finish a big group alone at the end.

SECONDS holds approximate times of the slow files on CI (one worker each, the other busy). Only their
order matters, so rough figures are fine; a file not listed starts after the listed ones. Refresh them
from a full run with `--durations=300`, adding up each file's setup and call times.
"""
from __future__ import annotations

import pytest

# Hundreds of short tests with nothing expensive shared: handed out one test at a time, at the end.
PER_TEST = ("tests/device/test_op_sweep.py", "tests/device/test_module_sweep.py")

SECONDS: dict[str, float] = {
    "tests/training/test_sft.py": 721,
    "tests/plan/test_quickstart_example.py": 300,
    "tests/plan/test_generate_deployed.py": 250,
    "tests/plan/test_layout_scaling.py": 230,
    "tests/plan/test_html_report.py": 210,
    "tests/plan/test_progress.py": 200,
    "tests/diffusers/test_qwen_image_tp.py": 220,
    "tests/integrations/test_tp.py": 191,
    "tests/diffusers/test_pipelines_compat.py": 190,
    "tests/integrations/test_compat.py": 166,
    "tests/compiler/test_vec_isa_record.py": 147,
    "tests/integrations/test_generate.py": 124,
    "tests/integrations/test_hf_generate_example.py": 122,
    "tests/training/test_hbm_fit.py": 119,
    "tests/reliability/test_signals_and_cache.py": 103,
    "tests/device/test_process_hygiene.py": 97,
    "tests/plan/test_generate_ep.py": 80,
    "tests/integrations/test_compat_subset.py": 81,
    "tests/plan/test_distributed_exactness.py": 80,
    "tests/training/test_accelerate_launch.py": 77,
    "tests/distributed/test_context_parallel.py": 74,
    "tests/integrations/test_detection.py": 68,
    "tests/diffusers/test_tp_transformers.py": 65,
    "tests/compiler/test_cache_limits.py": 58,
    "tests/distributed/test_pipelining.py": 55,
    "tests/clients/test_trl_defaults.py": 54,
    "tests/distributed/test_functional.py": 52,
    "tests/training/test_peft.py": 48,
    "tests/plan/test_models_commands.py": 48,
    "tests/compiler/test_cache.py": 44,
    "tests/test_dependency_check.py": 42,
    "tests/plan/test_exact.py": 42,
    "tests/plan/test_generate_calls.py": 40,
    "tests/clients/test_accelerate_test.py": 37,
    "tests/clients/test_parallel_compile.py": 31,
    "tests/plan/test_distributed_launch.py": 25,
    "tests/tools/test_top.py": 22,
    "tests/numerics/test_trainium.py": 21,
    "tests/compiler/test_artifacts.py": 21,
    "tests/device/test_caching_allocator.py": 20,
    "tests/clients/test_import_order.py": 20,
    "tests/distributed/test_parallel.py": 19,
    "tests/numerics/test_stochastic_rounding.py": 18,
    "tests/distributed/test_launch.py": 13,
    "tests/compiler/test_pipeline.py": 12,
    "tests/compiler/test_checkpointing.py": 11,
    "tests/device/test_autoload.py": 10,
    "tests/tools/test_registry.py": 9,
    "tests/reliability/test_processes_and_exit.py": 9,
    "tests/distributed/test_collectives.py": 8,
}


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def longest_files_first(items: list) -> None:
    """Reorder `items` in place: listed files by SECONDS (longest first), then the others in collection
    order, then the PER_TEST sweeps; each file's own tests keep their order (its fixtures' scopes)."""
    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(_file(item.nodeid), len(first_seen))

    def key(item):
        path = _file(item.nodeid)
        return (path in PER_TEST, -SECONDS.get(path, 0.0), first_seen[path])

    items.sort(key=key)  # stable: the order within a file is kept


def make_scheduler(config, log):
    """`--dist load` (pyproject's addopts) becomes file units in the collection order set above; an
    explicit other `--dist` is left to xdist."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = _file(nodeid)
            return nodeid if path in PER_TEST else path

    config.option.loadscopereorder = False  # keep longest_files_first's order (not "most tests first")
    return FileUnits(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    return make_scheduler(config, log)


def pytest_collection_modifyitems(config, items):
    longest_files_first(items)
