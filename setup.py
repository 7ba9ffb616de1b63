"""Build of torch-neuronx: the C++ core is compiled against the installed torch.

Metadata lives in pyproject.toml; this file only declares the extension, which
needs torch at build time (install with --no-build-isolation so the build uses
the torch already installed instead of downloading one).
"""
import glob
import os

os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")  # never autoload ourselves mid-build

from setuptools import setup  # noqa: E402
import torch  # noqa: E402
from torch.utils.cpp_extension import BuildExtension, CppExtension, include_paths  # noqa: E402


def cxx_standard(torch_version: str) -> str:
    """The C++ standard to compile the core with for this torch: torch 2.14's headers require
    C++20; 2.13's build with C++17, which the core has always used there."""
    major, minor = (int(part) for part in torch_version.split(".")[:2])
    return "c++17" if (major, minor) <= (2, 13) else "c++20"


def reuse_built_core() -> bool:
    """TORCH_NEURONX_REUSE_CORE=1 installs around a core already built in the tree (a second environment
    with the same torch, as the vLLM one of .ci/vllm) instead of compiling it again."""
    return os.environ.get("TORCH_NEURONX_REUSE_CORE") == "1" and bool(glob.glob("torch_neuronx/_C*.so"))


setup(
    ext_modules=[] if reuse_built_core() else [
        CppExtension(
            name="torch_neuronx._C",
            sources=sorted(glob.glob("csrc/*.cpp")),
            # Kineto's headers (csrc/profiler.cpp) include each other by bare name.
            include_dirs=[os.path.abspath("csrc"), os.path.join(include_paths()[0], "kineto")],
            # Hidden visibility and -fno-plt: calls inside _C are direct instead of through PLT
            # stubs (fewer I-cache misses per op; docs/virtual-runtime.md). Nothing links against _C.
            extra_compile_args=["-O2", "-g0", "-fvisibility=hidden", "-fvisibility-inlines-hidden", "-fno-plt", f"-std={cxx_standard(torch.__version__)}", "-Wno-unused-parameter"],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
