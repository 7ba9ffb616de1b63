"""Compile cache of the neuron backend: in memory and on disk.

Memory: an LRU of compiled callables keyed by `graph_key()` (the graph's code,
each input's shape/stride/dtype/device/requires_grad/aliasing, constants, the
grad/autocast state, the Inductor and AOTAutograd configuration, torch's
version, our backend version and the settings higher layers register in
hooks.cache_key_fields, such as the numerics mode). A hit skips AOTAutograd and code generation.

Disk: Inductor's FX-graph and AOTAutograd caches (plus its compiled-kernel
cache), redirected for the duration of a neuron compile to
`$TORCH_NEURONX_NEFF_CACHE_DIR/torch-<version>/`. Their keys already hash the
graph, input metadata, configs and torch; our device pass adds our backend
version (_registration.py). Inductor writes entries atomically (temp file +
rename) and takes file locks for kernel builds; we set its lock timeout from
TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT. Before a compile, entries are checked
against a checksum sidecar written after the previous compile: a corrupt or
truncated entry is removed with a warning, so the compile rebuilds and
replaces it. A cache folder that cannot be written gives a warning and
memory-only caching in a private temporary folder.
"""
from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import tempfile
import threading
import warnings
from collections import OrderedDict

import torch

from .._torch_versions import require
from . import hooks
from ._version import backend_version

# The torch minors whose torch._inductor.codecache.LOCK_TIMEOUT global and cache config flags
# disk_session sets were checked against.
DISK_SESSION_WRITTEN_FOR = ("2.13", "2.14", "2.15")

_SIDECAR = ".neuron-sha256"
_ENTRY_DIRS = ("fxgraph", "aotautograd")
_lock = threading.Lock()
_memory: OrderedDict[str, object] = OrderedDict()
_private_dir: str | None = None
_warned_dirs: set[str] = set()


# ---------------------------------------------------------------------------- keys

def _tensor_meta(t) -> tuple:
    return (tuple(t.shape), tuple(t.stride()), str(t.dtype), str(t.device), bool(t.requires_grad),
            t.storage_offset(), bool(getattr(t, "is_leaf", True)), type(t).__name__,
            str(getattr(t, "_dynamo_static_input_type", None)))


def _input_signature(example_inputs) -> list:
    sig, storages = [], {}
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.Tensor):
            try:
                sid = id(x.untyped_storage())
            except Exception:  # noqa: BLE001 - storage-less tensors
                sid = None
            alias_of = storages.setdefault(sid, i) if sid is not None else i
            sig.append(("T",) + _tensor_meta(x) + (alias_of,))
        else:
            sig.append((type(x).__name__, repr(x)))
    return sig


def _constants_digest(gm: torch.fx.GraphModule, digest) -> bool:
    """Hash get_attr tensors into `digest`; False when one is too large to hash cheaply."""
    for node in gm.graph.nodes:
        if node.op != "get_attr":
            continue
        value = gm
        for part in node.target.split("."):
            value = getattr(value, part, None)
        if isinstance(value, torch.Tensor):
            if value.numel() * value.element_size() > (1 << 20):
                return False
            cpu = value.detach()
            if cpu.device.type == "neuron":
                cpu = cpu.cpu()
            digest.update(repr(_tensor_meta(value)).encode())
            digest.update(cpu.contiguous().view(torch.uint8).numpy().tobytes() if cpu.numel() else b"")
        elif isinstance(value, torch.fx.GraphModule):
            digest.update(value.code.encode())
    return True


def _ambient_state() -> tuple:
    autocast = []
    for device in ("neuron", "cpu"):
        try:
            autocast.append((device, torch.is_autocast_enabled(device), str(torch.get_autocast_dtype(device))))
        except Exception:  # noqa: BLE001
            autocast.append((device, None))
    return (torch.is_grad_enabled(), torch.is_inference_mode_enabled(), tuple(autocast),
            torch.are_deterministic_algorithms_enabled(), torch.get_default_dtype())


def _config_digest() -> str:
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    parts = []
    for cfg in (inductor_config, functorch_config):
        try:
            parts.append(repr(sorted((k, repr(v)) for k, v in cfg.get_config_copy().items())))
        except Exception:  # noqa: BLE001
            parts.append(repr(cfg))
    return hashlib.sha256("".join(parts).encode()).hexdigest()


def graph_key(gm: torch.fx.GraphModule, example_inputs, option_fields: tuple = ()) -> str | None:
    """Key of a compiled program; None when the graph must not be cached in memory."""
    digest = hashlib.sha256()
    digest.update(f"torch {torch.__version__}\nneuron-backend {backend_version()}\n".encode())
    for name, module in gm.named_modules():
        if isinstance(module, torch.fx.GraphModule):
            digest.update(name.encode())
            digest.update(module.code.encode())
    if not _constants_digest(gm, digest):
        return None
    digest.update(repr(_input_signature(example_inputs)).encode())
    digest.update(repr(_ambient_state()).encode())
    digest.update(repr(option_fields).encode())
    for fields in hooks.key_fields():   # e.g. TORCH_NEURONX_NUMERICS and its settings (compiler/hooks.py)
        digest.update(repr(fields).encode())
    digest.update(_config_digest().encode())
    return digest.hexdigest()


# --------------------------------------------------------------------- memory cache

def memory_get(key: str | None):
    if key is None:
        return None
    with _lock:
        fn = _memory.get(key)
        if fn is not None:
            _memory.move_to_end(key)
        return fn


def memory_put(key: str | None, fn, max_entries: int) -> None:
    if key is None or max_entries <= 0:
        return
    with _lock:
        _memory[key] = fn
        _memory.move_to_end(key)
        while len(_memory) > max_entries:
            _memory.popitem(last=False)


def clear_memory_cache() -> None:
    with _lock:
        _memory.clear()


def memory_cache_size() -> int:
    return len(_memory)


# ----------------------------------------------------------------------- disk cache

def _private_tmp() -> str:
    global _private_dir
    if _private_dir is None:
        _private_dir = tempfile.mkdtemp(prefix="torch_neuronx_compile_")
        atexit.register(shutil.rmtree, _private_dir, True)
    return _private_dir


def _writable(path: str) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".probe"):
            pass
        return True
    except OSError:
        return False


def disk_root(options) -> str | None:
    """The folder of this torch version's disk cache; None when disabled or unwritable."""
    if not options.cache:
        return None
    root = os.path.join(options.cache_dir, f"torch-{torch.__version__}")
    if _writable(root):
        return root
    if root not in _warned_dirs:
        _warned_dirs.add(root)
        warnings.warn(f"torch-neuronx: compile cache folder {root!r} (TORCH_NEURONX_NEFF_CACHE_DIR) is not "
                      "writable; using an in-memory cache only", RuntimeWarning, stacklevel=4)
    return None


def _entry_files(root: str):
    for sub in _ENTRY_DIRS:
        base = os.path.join(root, sub)
        if not os.path.isdir(base):
            continue
        for dirpath, _, files in os.walk(base):
            for name in files:
                if not name.startswith(".") and not name.endswith((".lock", _SIDECAR, ".tmp")):
                    yield os.path.join(dirpath, name)


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def seal_entries(root: str) -> None:
    """Write a checksum sidecar next to each new cache entry (atomically)."""
    for path in _entry_files(root):
        sidecar = path + _SIDECAR
        if os.path.exists(sidecar):
            continue
        try:
            tmp = f"{sidecar}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write(_sha256(path))
            os.replace(tmp, sidecar)
        except OSError:
            pass


_verified: set[tuple[str, int, int]] = set()


def verify_entries(root: str) -> list[str]:
    """Remove entries whose bytes no longer match their checksum; returns them.

    Each (path, size, mtime) is checked once per process.
    """
    removed = []
    for path in list(_entry_files(root)):
        try:
            st = os.stat(path)
        except OSError:
            continue
        stamp = (path, st.st_size, st.st_mtime_ns)
        if stamp in _verified:
            continue
        sidecar = path + _SIDECAR
        try:
            with open(sidecar) as f:
                expected = f.read().strip()
        except OSError:
            continue  # not sealed yet (being written by another rank, or a crash before sealing)
        try:
            ok = _sha256(path) == expected
        except OSError:
            continue
        if ok:
            _verified.add(stamp)
        else:
            for p in (path, sidecar):
                with contextlib.suppress(OSError):
                    os.remove(p)
            removed.append(path)
    if removed:
        warnings.warn(f"torch-neuronx: removed {len(removed)} corrupt compile cache entr"
                      f"{'y' if len(removed) == 1 else 'ies'} ({', '.join(os.path.basename(p) for p in removed)}); "
                      "the graph is recompiled and the entry replaced", RuntimeWarning, stacklevel=4)
    return removed


def _disk_counters() -> tuple[int, int, int, int]:
    from torch._dynamo.utils import counters

    return (counters["inductor"]["fxgraph_cache_hit"], counters["inductor"]["fxgraph_cache_miss"],
            counters["aot_autograd"]["autograd_cache_hit"], counters["aot_autograd"]["autograd_cache_miss"])


class DiskSession:
    """What one neuron compile did with the disk cache."""

    def __init__(self, root: str | None, inductor_dir: str) -> None:
        self.root = root
        self.inductor_dir = inductor_dir   # where Inductor builds and loads its kernel libraries
        self._before = _disk_counters()
        self.removed: list[str] = []

    def outcome(self) -> str:
        """"hit" (everything came from disk), "miss" or "off"."""
        if self.root is None:
            return "off"
        fx_hit, fx_miss, aot_hit, aot_miss = (a - b for a, b in zip(_disk_counters(), self._before))
        if aot_hit > 0 and aot_miss == 0 and fx_miss == 0:
            return "hit"
        if fx_hit > 0 and fx_miss == 0 and aot_miss == 0:
            return "hit"
        return "miss"


@contextlib.contextmanager
def disk_session(options):
    """Point Inductor's caches at our folder (or disable them) for one compile."""
    require("torch_neuronx.compiler._cache.disk_session (sets torch._inductor.codecache.LOCK_TIMEOUT)",
            DISK_SESSION_WRITTEN_FOR)
    import torch._functorch.config as functorch_config
    import torch._inductor.codecache as codecache
    import torch._inductor.config as inductor_config

    root = disk_root(options)
    inductor_dir = root if root is not None else os.path.join(_private_tmp(), "inductor")
    previous_env = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    previous_timeout = codecache.LOCK_TIMEOUT
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = inductor_dir
    codecache.LOCK_TIMEOUT = options.lock_timeout
    session = DiskSession(root, inductor_dir)
    try:
        if root is not None:
            session.removed = verify_entries(root)
        with inductor_config.patch(fx_graph_cache=root is not None, file_lock_timeout=options.lock_timeout), \
                functorch_config.patch(enable_autograd_cache=root is not None, force_non_lazy_backward_lowering=True):
            yield session
        if root is not None:
            seal_entries(root)
    finally:
        codecache.LOCK_TIMEOUT = previous_timeout
        if previous_env is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = previous_env
