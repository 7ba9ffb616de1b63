"""Every environment variable torch-neuronx recognises, in one table, and the
start-up check of the process environment against it.

Three kinds:
- "implemented": read by the virtual runtime, compiler, numerics, planner or tools;
- "no effect": a TorchNeuron or Neuron runtime variable that means something on
  Trainium (compiler flags, NRT internals) and nothing on the virtual core; it is
  accepted, with one notice that it has no effect here;
- "internal": set by torch-neuronx for its own child processes or by its CI.

`check()` runs once per process when the runtime starts (runtime.start): a set
"no effect" variable gets its notice on the runtime's logger; an unknown
TORCH_NEURONX_* or NEURON_RT_* name gets one warning naming the closest known
one (a misspelt TORCH_NEURONX_NUMERICS would otherwise be ignored without
a word). docs/environment-variables.md is this table, written out.
"""
from __future__ import annotations

import difflib
import logging
import os
import re
import warnings
from dataclasses import dataclass

IMPLEMENTED, NO_EFFECT, INTERNAL = "implemented", "no effect", "internal"
CHECKED_PREFIXES = ("TORCH_NEURONX_", "NEURON_RT_")


@dataclass(frozen=True)
class Variable:
    name: str
    kind: str
    meaning: str


def _table(kind: str, rows: str) -> list[Variable]:
    """Rows "NAME  meaning" (two spaces or more between them), one a line."""
    out = []
    for line in rows.strip().splitlines():
        name, meaning = re.split(r"\s{2,}", line.strip(), maxsplit=1)
        out.append(Variable(name, kind, meaning))
    return out


VARIABLES: tuple[Variable, ...] = tuple(_table(IMPLEMENTED, """
NEURON_LOGICAL_NC_CONFIG  LNC degree, 1 or 2 (default 2 on trn2/trn3): logical cores per chip and HBM per core
NEURON_RT_VISIBLE_CORES  cores this process sees ("0-3", "0,2"); device indices follow them
NEURON_RT_NUM_CORES  number of cores this process sees (0: all)
NEURON_RT_LOG_LEVEL  level of the runtime's own log (logger torch_neuronx.runtime): ERROR, WARNING, INFO, DEBUG, TRACE, QUIET
NEURON_RT_LOG_LOCATION  where that log goes: console (stderr) or syslog
NEURON_RT_STOCHASTIC_ROUNDING_EN  stochastic rounding of bf16 results under TORCH_NEURONX_NUMERICS=trainium
NEURON_RT_STOCHASTIC_ROUNDING_SEED  seed of that rounding
NEURON_LAUNCH_BLOCKING  0 or 1, validated; execution on the virtual core is synchronous already
NEURON_PLATFORM_TARGET_OVERRIDE  NKI target (trn1, trn2, trn3) of nki kernels
NEURON_COMPILATION_CACHE_MAX_ENTRIES  compiled graphs kept in memory (default 512)
TORCH_NEURONX_INSTANCE_TYPE  instance the virtual runtime models (default trn2.3xlarge)
TORCH_NEURONX_HBM_BYTES_PER_CORE  HBM per logical core, overriding the chip's
TORCH_NEURONX_ALLOCATOR_CACHE_LIMIT  free device memory the caching allocator keeps per process
TORCH_NEURONX_NO_MEMORY_CACHING  1: no allocator caching (as PYTORCH_NO_CUDA_MEMORY_CACHING)
TORCH_NEURONX_RUNTIME_DIR  folder of the per-process pages neuron-ls/neuron-top read
TORCH_NEURONX_DEFAULT_COMPILE_BACKEND  0: torch.compile without backend= keeps Inductor on neuron inputs (default 1: backend "neuron")
TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION  1 (default): a graph that fails to compile raises; 0: it runs eagerly
TORCH_NEURONX_NEFF_CACHE_DIR  on-disk compile cache folder
TORCH_NEURONX_DISABLE_NEFF_CACHE  1: no compile cache
TORCH_NEURONX_NEFF_DISABLE_CACHE  same as TORCH_NEURONX_DISABLE_NEFF_CACHE
TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT  seconds to wait for the compile cache's file lock (default 1200)
TORCH_NEURONX_DEBUG_DIR  compilation artifacts folder (default /tmp/neuron_backend)
TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS  1: keep FX graphs and generated code under TORCH_NEURONX_DEBUG_DIR
TORCH_NEURONX_RECOMPILE_WARN_THRESHOLD  recompilations of one function before the static-shape advice
TORCH_NEURONX_COMPILE_ONLY  1: compile-only mode: graphs compile and fill the cache, nothing executes; the compile budget at exit (docs/compile-budget.md)
TORCH_NEURONX_METRICS_ENABLED  1: torch_neuronx.metrics on (FLOPs of each compiled graph counted)
TORCH_NEURONX_ENABLED_METRIC_TABLES  metric tables written as CSV at exit (graph_stats)
TORCH_NEURONX_METRICS_DIR  folder of the metric CSVs (default /tmp)
TORCH_NEURONX_COMPILED_HOST_PROGRAM  1 (default): compiled graphs run as host programs
TORCH_NEURONX_NUMERICS  host (default), check or trainium: where results would differ on Trainium
TORCH_NEURONX_NUMERICS_INT64  int64 treatment under TORCH_NEURONX_NUMERICS=trainium
TORCH_NEURONX_NUMERICS_FLOAT64  float64 treatment under TORCH_NEURONX_NUMERICS=trainium
TORCH_NEURONX_NUMERICS_FP8_OVERFLOW  fp8 overflow treatment under TORCH_NEURONX_NUMERICS=trainium
TORCH_NEURONX_NUMERICS_REPORT  file the numerics report is written to at exit
TORCH_NEURONX_HOST_LOW_PRECISION_GEMM  host GEMM kernels of bf16/fp16 matmuls
TORCH_NEURONX_STRICT_OPS  1: an op TorchNeuron rejects raises instead of running
TORCH_NEURONX_ESTIMATE_STRICT  1: torch_neuronx.estimate raises on an op it has no cost model for
TORCH_NEURONX_COLLECTIVE_CHECKS  cross-rank checks of collective calls
TORCH_NEURONX_ESTIMATE_ASSUMPTIONS  file of cost-model assumptions for torch_neuronx.estimate
TORCH_NEURONX_DRY_RUN  1: dry run at full size (phantom memory, shape-only ops); see docs/plan.md
TORCH_NEURONX_DRY_RUN_REPORT  file the dry run's report is written to
TORCH_NEURONX_DRY_RUN_TRACE  file the dry run's trace is written to
TORCH_NEURONX_DRY_RUN_LARGE_BYTES  allocations the dry run lists as large
TORCH_NEURONX_DRY_RUN_MAX_SYNCS_PER_SITE  host syncs recorded per call site in a dry run
TORCH_NEURONX_COMPAT_THREADS  threads of the Hugging Face compatibility sweep
TORCH_NEURONX_LOG_LEVEL  level of all torch_neuronx loggers: 0 WARNING (default), 1 WARNING, 2 INFO, 3 DEBUG
TORCH_NEURONX_LOG_FILE  file the torch_neuronx loggers also write to
""") + _table(NO_EFFECT, """
TORCH_NEURONX_COMPLEX_DECOMPOSE  complex ops in compiled graphs run their host kernels either way (Inductor falls back to them); results equal eager
NEURON_CC_FLAGS  neuronx-cc flags: there is no neuronx-cc; graphs are compiled by Inductor's C++ path
NEURON_COMPILER_OPT_LEVEL  neuronx-cc optimisation level (no neuronx-cc here)
NEURON_COMPILATION_CACHE_MAX_SIZE_MB  in-memory cache size bound (entries are bounded by NEURON_COMPILATION_CACHE_MAX_ENTRIES)
TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR  local NEFF cache tier (one on-disk tier here: TORCH_NEURONX_NEFF_CACHE_DIR)
TORCH_NEURONX_NEURONX_CC_TIMEOUT  neuronx-cc timeout (no neuronx-cc here)
TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY  compiled graphs take CPU inputs as Inductor does
TORCH_NEURONX_RETAIN_DEVICE_MODE  outputs are on the device their op ran on
TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS  every op runs on the virtual core; none falls back after an execution error
TORCH_NEURONX_ENABLE_STACK_TRACE  per-op Python stacks (torch.profiler with_stack=True records them)
TORCH_NEURONX_ENABLE_NKI_SDPA  NKI attention kernel (SDPA runs PyTorch's kernels here)
TORCH_NEURONX_ENABLE_ASYNC_NRT  asynchronous NRT execution (the virtual core is synchronous)
TORCH_NEURONX_MLIR_ATEN_OPS  MLIR lowering of eager ops (eager ops run host kernels)
TORCH_NEURONX_ENABLE_CONCATENATION  fusion of queued eager ops (eager ops run one by one)
TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD  same
TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT  same
TORCH_NEURONX_APPLY_SKIP_INTERMEDIATE  same
TORCH_NEURONX_ATEN_GMM_ALIGN  grouped-mm alignment of the Trainium kernel
NEURON_USE_SPLIT_ALLGATHER  split-based all_gather on Neuron collectives
NEURON_USE_SPLIT_REDUCE_SCATTER  split-based reduce_scatter on Neuron collectives
COLLECTIVE_BUCKETSIZE_IN_MB  collective bucket size on Neuron collectives
COLLECTIVE_MIN_BUCKETS  collective bucket count on Neuron collectives
NEURON_ENHANCED_ERROR_HANDLING  NRT error handling
NEURON_DUMP_EXECUTION_ON_ERROR  NRT execution dumps
NEURON_ERROR_DUMP_DIR  NRT execution dump folder
NEURON_FALLBACK_ENABLED  NRT fallback switch
NEURON_MAX_RESOURCE_SLOTS  NRT resource slots
NEURON_RT_EXEC_TIMEOUT  per-execution timeout of the NRT
NEURON_RT_VALIDATE_HASH  NEFF checksum on load (no NEFFs here)
NEURON_RT_MULTI_INSTANCE_SHARED_WEIGHTS  NRT weight sharing between model instances
NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS  NRT asynchronous execution
NEURON_RT_ALLOW_LEGACY_NEFF  NEFFs of older chips (no NEFFs here)
NEURON_RT_DBG_ZEROCOPY  NRT zero-copy debugging
NEURON_RT_ROOT_COMM_ID  NRT collectives bootstrap (torch.distributed's store is used)
NEURON_RT_ENABLE_HOST_CC  NRT host collectives
NEURON_RT_VIRTUAL_CORE_SIZE  older name of the LNC degree (use NEURON_LOGICAL_NC_CONFIG)
NEURON_RT_INSPECT_ENABLE  NRT profiling by variables (torch.profiler records neuron here)
NEURON_RT_INSPECT_OUTPUT_DIR  same
NEURON_RT_INSPECT_DEVICE_PROFILE  same
NEURON_RT_INSPECT_SYSTEM_PROFILE  same
NEURON_RT_LOG_LEVEL_NRT  per-component NRT log level (NEURON_RT_LOG_LEVEL sets the runtime's one log)
NEURON_RT_LOG_LEVEL_TDRV  same
NEURON_RT_LOG_LEVEL_NMGR  same
NEURON_RT_LOG_LEVEL_KMGR  same
NEURON_RT_LOG_LOCATION_NRT  per-component NRT log location (NEURON_RT_LOG_LOCATION sets the runtime's one log)
NEURON_RT_LOG_LOCATION_TDRV  same
NEURON_RT_LOG_LOCATION_NMGR  same
NEURON_RT_LOG_LOCATION_KMGR  same
""") + _table(INTERNAL, """
TORCH_NEURONX_PLAN_CHILD  set by `python -m torch_neuronx.plan` in the child processes it starts (its pid)
TORCH_NEURONX_PLAN_QUIET  set by `plan run --quiet` for the script's process
TORCH_NEURONX_PLAN_VERBOSE  set by `plan run -v` for the script's process
TORCH_NEURONX_PLAN_STARTED  the plan's start time and progress lines, handed to the plan's child process
TORCH_NEURONX_COMPAT_TEST_CRASH  test hook of the compatibility sweep
TORCH_NEURONX_TITAN_SITE  CI: folder of TorchTitan's extra packages
TORCH_NEURONX_REUSE_CORE  build: `1` installs around the C++ core already built in the tree (vLLM's second environment)
TORCH_NEURONX_VLLM_VENV  CI: folder of vLLM's environment made by .ci/vllm (default .venv-vllm)
"""))

BY_NAME: dict[str, Variable] = {v.name: v for v in VARIABLES}
logger = logging.getLogger("torch_neuronx.runtime")
_checked = {"done": False}


def closest(name: str) -> str | None:
    """The known variable nearest to `name` (difflib), or None if nothing is close."""
    match = difflib.get_close_matches(name, BY_NAME, n=1, cutoff=0.6)
    return match[0] if match else None


def check(environ=None, force: bool = False) -> None:
    """Once per process: a notice for each set "no effect" variable, a warning for each unknown
    TORCH_NEURONX_* / NEURON_RT_* name."""
    if _checked["done"] and not force:
        return
    _checked["done"] = True
    environ = os.environ if environ is None else environ
    for name in sorted(environ):
        known = BY_NAME.get(name)
        if known is not None:
            if known.kind == NO_EFFECT:
                logger.warning("%s is a Trainium setting with no effect on the virtual NeuronCore runtime "
                               "(%s); accepted and ignored", name, known.meaning)
            continue
        if not name.startswith(CHECKED_PREFIXES):
            continue
        hint = closest(name)
        suggestion = f"; did you mean {hint}?" if hint else ""
        warnings.warn(f"{name} is not an environment variable torch-neuronx knows{suggestion} It is ignored "
                      "(docs/environment-variables.md lists every variable).", UserWarning, stacklevel=2)
