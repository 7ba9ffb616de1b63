"""Remember which of Inductor's vector-ISA test libraries loaded, so a fresh process does not load them again.

Before its first C++ kernel, every process that compiles with Inductor's C++ code generation checks each vector
ISA the CPU advertises (AVX2, AVX-512, VNNI, AMX, bf16/fp16 variants). For each check it builds a small test
library once (cached in the compile cache) and then, in every process, starts a child Python that loads it,
so that an unsupported instruction crashes the child and not the compiler. Those ten children cost about 2 s per
process on this 2-core host: ~40% of a fresh process's compile time on a warm compile cache.

Whether a library loads depends on the library file, the CPU and torch. After a child loaded one, we write a
marker next to it (`<library>.loaded-<cpu key>`: its size and mtime). A later process that finds a matching
marker skips the child. A failed load writes nothing, so failures are always checked again. Inductor's choice of ISA
and every cache key stay exactly as without the markers.

A test library that is not a whole shared object (empty or cut short by a build killed in the linker) would fail
every later check, so every later process would silently compile without that ISA (scalar kernels, other cache
keys). Inductor never rebuilds a library that exists; we remove such a library (inside Inductor's lock for it)
and check the ISA once more, which rebuilds it.

From torch 2.14 on, Inductor writes a marker of its own after a child loaded a library (`<library>.load_ok`,
trusted while it exists) and skips the child when it finds one, so there we write no marker (ours would never be
read) and keep only the rebuild of a damaged library.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import tempfile
import threading
import warnings

from .._torch_versions import require
from . import _kernel_libraries as kernel_libraries

# The torch minors whose torch._inductor.cpu_vec_isa.VecISA._probe_load and check_build these wrappers were checked against.
WRITTEN_FOR = ("2.13", "2.14", "2.15")
# Whether that torch's check_build keeps its own load marker (`<library>.load_ok`) and skips _probe_load on it.
INDUCTOR_MARKS_LOADS = {"2.13": False, "2.14": True, "2.15": True}


def marker_glob() -> str:
    """The file-name pattern of the markers that remember a load on the running torch (ours or Inductor's)."""
    return "*.load_ok" if INDUCTOR_MARKS_LOADS[require("torch_neuronx.compiler._vec_isa.marker_glob", WRITTEN_FOR)] \
        else "*.loaded-*"


def advertised_isas() -> list[str]:
    """The x86 ISAs from Inductor's list whose CPU flags this CPU reports (before any build check)."""
    from torch._inductor import cpu_vec_isa

    flags = cpu_vec_isa.x86_isa_checker()
    return [str(isa) for isa in cpu_vec_isa.supported_vec_isa_list if all(f in flags for f in str(isa).split())]


def all_advertised_valid() -> bool:
    """Run Inductor's probe (cached per process); True on x86 when every advertised ISA builds and loads."""
    from torch._inductor import cpu_vec_isa

    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    advertised = advertised_isas()
    return bool(advertised) and [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()] == advertised


@functools.cache
def _cpu_key() -> str:
    import torch
    from torch._inductor import cpu_vec_isa

    flags = sorted(cpu_vec_isa.x86_isa_checker()) if platform.machine() in ("x86_64", "AMD64") else []
    ident = json.dumps([torch.__version__, platform.machine(), platform.processor(), flags])
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def _fingerprint(library: str) -> list[int]:
    st = os.stat(library)
    return [st.st_size, st.st_mtime_ns]


def marker_path(library: str) -> str:
    return f"{library}.loaded-{_cpu_key()}"


def loaded_before(library: str) -> bool:
    try:
        with open(marker_path(library)) as f:
            return json.load(f) == _fingerprint(library)
    except (OSError, ValueError):
        return False


def remember_loaded(library: str) -> None:
    try:
        directory = os.path.dirname(library) or "."
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".loaded")
        with os.fdopen(fd, "w") as f:
            json.dump(_fingerprint(library), f)
        os.replace(tmp, marker_path(library))  # atomic: readers see no marker or a whole one
    except OSError:
        pass  # an optimisation only: the next process loads it in a child again


_rebuild = threading.local()   # set inside a probe that removed a damaged library; read by check_build


def install() -> bool:
    """Wrap Inductor's `VecISA._probe_load` once (it exists in every torch of WRITTEN_FOR)."""
    from torch._inductor import cpu_vec_isa

    from .._wrap import wrap_once

    what = "torch_neuronx.compiler._vec_isa.install (wraps torch._inductor.cpu_vec_isa.VecISA._probe_load and check_build)"
    own_markers = not INDUCTOR_MARKS_LOADS[require(what, WRITTEN_FOR)]
    if not hasattr(cpu_vec_isa.VecISA, "_probe_load"):
        raise RuntimeError(f"torch-neuronx: {what}: this torch has no VecISA._probe_load")

    def make(original):
        def _probe_load(self, output_path: str) -> bool:
            if own_markers and loaded_before(output_path):
                return True
            ok = original(self, output_path)
            if ok:
                if own_markers:
                    remember_loaded(output_path)
            elif platform.system() == "Linux" and not kernel_libraries.whole(output_path):   # we hold Inductor's lock here
                os.remove(output_path)
                _rebuild.pending = True
            return ok

        return _probe_load

    def make_check(original):
        def check_build(self, code: str) -> bool:
            ok = original(self, code)
            if not ok and getattr(_rebuild, "pending", False):
                _rebuild.pending = False
                ok = original(self, code)   # the library is gone: Inductor builds it again
                warnings.warn(f"torch-neuronx: Inductor's {self} test library in the compile cache was damaged "
                              f"(left by an interrupted build); removed and rebuilt: {self} "
                              f"{'is' if ok else 'is still not'} usable", RuntimeWarning, stacklevel=2)
            return ok

        return check_build

    wrap_once(cpu_vec_isa.VecISA, "_probe_load", make)
    wrap_once(cpu_vec_isa.VecISA, "check_build", make_check)
    return True
