"""Build of torch-neuronx: the C++ core is compiled against the installed torch.

Metadata lives in pyproject.toml; this file only declares the extension, which
needs torch at build time (install with --no-build-isolation so the build uses
the torch already installed instead of downloading one).
"""
import glob
import os

os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")  # never autoload ourselves mid-build

from setuptools import setup  # noqa: E402
from torch.utils.cpp_extension import BuildExtension, CppExtension, include_paths  # noqa: E402

setup(
    ext_modules=[
        CppExtension(
            name="torch_neuronx._C",
            sources=sorted(glob.glob("csrc/*.cpp")),
            # Kineto's headers (csrc/profiler.cpp) include each other by bare name.
            include_dirs=[os.path.abspath("csrc"), os.path.join(include_paths()[0], "kineto")],
            extra_compile_args=["-O2", "-g0", "-std=c++17", "-Wno-unused-parameter"],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
