"""`pip install` of Loom's Python package from this folder, with no network:

    /usr/bin/python3 -m pip install --no-build-isolation python/

The package is built with CMake, as the rest of Loom is: the extension `loom._loom` and the
Python modules are taken from a build's `python/loom` folder. LOOM_BUILD_DIR names an
existing build to take them from (a relative path is taken from the repository's root) (it is brought up to date, `cmake --build DIR --target
loom-python`); without it, Loom is configured and built in `build-python/` beside this
folder (Debian's MLIR 22, as scripts/build.sh does; several minutes on 2 cores). Debian's
setuptools and wheel are all it needs beyond Loom's own packages (scripts/setup.sh), hence
--no-build-isolation: pip would otherwise fetch them.
"""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def loom_build_dir():
    given = os.environ.get("LOOM_BUILD_DIR")
    if given:
        # pip runs this file from its own folder: a relative path is the repository's.
        build = os.path.join(ROOT, given)
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            raise SystemExit(f"LOOM_BUILD_DIR={given}: not a configured Loom build")
        return build, False
    return os.path.join(ROOT, "build-python"), True


class BuildWithCMake(build_py):
    """Builds the package's CMake target, then copies build/python/loom into the wheel."""

    def run(self):
        build, configure = loom_build_dir()
        if configure:
            subprocess.check_call(
                ["cmake", "-G", "Ninja", "-S", ROOT, "-B", build,
                 "-DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir", "-DLOOM_ENABLE_PYTHON=ON"])
        subprocess.check_call(["cmake", "--build", build, "--target", "loom-python"])
        built = os.path.join(build, "python", "loom")
        if not os.path.exists(built):
            raise SystemExit(f"{build}: built without the Python package (is pybind11-dev "
                             "installed, and LOOM_ENABLE_PYTHON on?)")
        target = os.path.join(self.build_lib, "loom")
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(built, target)


class NativeDistribution(Distribution):
    """The wheel holds a native extension: it is for this platform and Python only."""

    def has_ext_modules(self):
        return True


setup(
    name="loom",
    version="0.1.0",
    description="Loom, an auto-parallel compiler for deep-learning training, from Python",
    # The package's sources are python/loom; what goes into the wheel is the build's copy
    # of them with the extension beside (BuildWithCMake).
    packages=["loom"],
    python_requires=">=3.9",
    cmdclass={"build_py": BuildWithCMake},
    distclass=NativeDistribution,
    zip_safe=False,
)
