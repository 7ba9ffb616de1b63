"""Broken kernel libraries in the compile cache: found when loading fails, removed, rebuilt.

Inductor builds each C++ kernel library (`<key>.main.so`) with g++ writing straight into the cache
folder, under a file lock, and later processes skip the build when the file exists. A build killed
part-way (SIGKILL, a timeout's killpg, the OOM killer) leaves an empty or truncated library and its
`<key>.main_CxxBuild` folder behind, and every later compile that needs that kernel would fail to
load it ("file too short", "invalid ELF header") forever. The checksum sidecars (_cache.py) cannot
catch this: the library is never sealed, since sealing is what a finished compile does.

Loading a library that is cut short past its ELF header is worse than failing: the loader maps
pages beyond the end of the file and the process dies of SIGBUS. So every library Inductor loads is
first checked to be whole (its program segments and section table lie inside the file), and one
that is not raises ImportError instead.

A compile whose load fails on a library inside the cache folder removes that library (under the
kernel's own Inductor lock, and only if it is still the same file, so a concurrent process that
already rebuilt it keeps its copy) and compiles again; the rebuild replaces it. Seen in CI: a 0-byte
library left by a killed test process failed an unrelated test on every fresh machine.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import struct
import warnings

from .._torch_versions import require

# The torch minors whose torch._inductor.codecache.get_lock_dir, CppCodeCache._load_library (a classmethod
# every kernel cache inherits) and `<key>.lock` / `<name>_CxxBuild` naming this module relies on were read.
WRITTEN_FOR = ("2.13", "2.14", "2.15")

ATTEMPTS = 3   # one broken library per attempt: a graph rarely has more than one half-built kernel
_LIBRARY = re.compile(r"(/[^\s:'\"]+\.so)\b")


def whole(library: str) -> bool:
    """False for a file no loader can map whole: shorter than an ELF header, not ELF, or cut short before the
    end of a loadable segment or of the section table. (Only 64-bit little-endian ELF is measured; anything
    else is left to the loader.)"""
    try:
        with open(library, "rb") as f:
            header = f.read(64)
            size = os.fstat(f.fileno()).st_size
            if len(header) < 64 or not header.startswith(b"\x7fELF"):
                return False
            if header[4:6] != b"\x02\x01":   # ELFCLASS64, little-endian
                return True
            phoff, shoff = struct.unpack_from("<QQ", header, 0x20)
            phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", header, 0x36)
            if shoff + shnum * shentsize > size or phoff + phnum * phentsize > size:
                return False
            f.seek(phoff)
            table = f.read(phnum * phentsize)
    except OSError:
        return False
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", table, i * phentsize)
        if p_type == 1 and p_offset + p_filesz > size:   # PT_LOAD
            return False
    return True


def install() -> None:
    """Check each library Inductor loads is whole first (a cut-short one raises ImportError, not SIGBUS)."""
    require("torch_neuronx.compiler._kernel_libraries.install (wraps torch._inductor.codecache."
            "CppCodeCache._load_library)", WRITTEN_FOR)
    from torch._inductor.codecache import CppCodeCache

    from .._wrap import is_wrapped

    original = CppCodeCache.__dict__["_load_library"].__func__
    if is_wrapped(original):   # a classmethod, which _wrap.wrap_once does not handle: same tag, set by hand
        return

    def _load_library(cls, path: str, key: str):
        if not whole(path):
            raise ImportError(f"{path}: not a whole shared library (empty or cut short, as a build killed in "
                              "the linker leaves it)")
        return original(cls, path, key)

    from .._wrap import _TAG

    setattr(_load_library, _TAG, True)
    _load_library.__wrapped__ = original
    CppCodeCache._load_library = classmethod(_load_library)


def _causes(err: BaseException):
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = getattr(err, "inner_exception", None) or err.__cause__ or err.__context__


def broken_library(err: BaseException, folder: str) -> str | None:
    """The library inside `folder` that this compile failure could not load, or None."""
    root = os.path.realpath(folder) + os.sep
    for cause in _causes(err):
        if not isinstance(cause, (ImportError, OSError)):
            continue
        for path in _LIBRARY.findall(str(cause)):
            if os.path.realpath(path).startswith(root) and os.path.isfile(path):
                return path
    return None


def _lock_path(library: str) -> str:
    import torch._inductor.codecache as codecache

    key = os.path.basename(library).split(".", 1)[0]
    return os.path.join(codecache.get_lock_dir(), key + ".lock")


def discard(library: str, lock_timeout: float) -> bool:
    """Remove a library that failed to load (and its leftover build folder); False if it changed meanwhile."""
    require("torch_neuronx.compiler._kernel_libraries.discard (Inductor's kernel lock and build folder names)",
            WRITTEN_FOR)
    from torch.utils._filelock import FileLock

    try:
        seen = os.stat(library)
    except OSError:
        return False
    with FileLock(_lock_path(library), timeout=lock_timeout):
        try:
            now = os.stat(library)
        except OSError:
            return False
        if (now.st_ino, now.st_size, now.st_mtime_ns) != (seen.st_ino, seen.st_size, seen.st_mtime_ns):
            return False   # another process rebuilt it after our load failed
        os.remove(library)
        stem = library[: -len(".so")]
        with contextlib.suppress(OSError):
            shutil.rmtree(stem + "_CxxBuild")
    return True


def compile_repairing(compile_once, folder: str, lock_timeout: float):
    """compile_once(), removing and rebuilding any broken library of `folder` it fails to load."""
    for attempt in range(ATTEMPTS):
        try:
            return compile_once()
        except Exception as err:
            library = broken_library(err, folder)
            if library is None or attempt == ATTEMPTS - 1:
                raise
            discard(library, lock_timeout)
            warnings.warn(f"torch-neuronx: the compile cache's kernel library {os.path.basename(library)} could not "
                          f"be loaded ({type(err).__name__}: {str(err).splitlines()[0][:200]}); it was left by an "
                          "interrupted build, so it was removed and is being rebuilt", RuntimeWarning, stacklevel=4)
    raise AssertionError("unreachable")
