"""Build the simulator runtime of every arch, as the package's CMake build does at install time.

    python tools/build_sim_runtime.py --out DIR [--arch mp_31 ...]

Writes DIR/<key>/libtilelang_musa_sim_<arch>.so for the compiler a kernel build would use (TILELANG_SIM_CXX, else
g++), from this source tree's simulator headers; CMake installs DIR as tilelang_musa/lib/sim_runtime/, where
jit/sim_runtime.py looks for the runtime of a key before building one into the kernel cache. The key and the flags
come from tilelang_musa/jit/sim_runtime_recipe.py and profiler/arch_figures.py, loaded by path: the build
environment has neither the package nor TVM. Without that compiler it builds nothing (kernels then build their
runtime on first use) and exits 0, so the package still installs.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INCLUDE_ROOT = ROOT / "src"
HEADERS = INCLUDE_ROOT / "tl_templates" / "sim"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


recipe = _load("_tl_sim_runtime_recipe", ROOT / "tilelang_musa" / "jit" / "sim_runtime_recipe.py")
arch_figures = _load("_tl_arch_figures", ROOT / "tilelang_musa" / "profiler" / "arch_figures.py")


def build(compiler: str, arch: str, out: Path) -> str:
    """Build `arch`'s runtime under `out`; returns a line saying what was done."""
    flags = recipe.base_flags(recipe.ARCHS[arch], INCLUDE_ROOT, HEADERS, arch_figures.sim_timing_flags(arch))
    key = recipe.runtime_key(recipe.compiler_identity(compiler), flags, INCLUDE_ROOT, HEADERS)
    directory = out / key
    directory.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=".", suffix=".so", dir=directory)
    os.close(fd)
    proc = subprocess.run(recipe.build_command([compiler], flags, HEADERS, arch, Path(temporary)),
                          capture_output=True, text=True)
    if proc.returncode != 0:
        os.unlink(temporary)
        raise SystemExit(f"building the {arch} simulator runtime failed:\n{proc.stderr.strip()}")
    os.replace(temporary, directory / recipe.library_name(arch))
    return f"{arch}: {directory / recipe.library_name(arch)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--arch", nargs="*", default=sorted(recipe.ARCHS), choices=sorted(recipe.ARCHS))
    args = parser.parse_args()
    compiler = os.environ.get("TILELANG_SIM_CXX") or recipe.DEFAULT_COMPILER
    if recipe.compiler_identity(compiler) == "sim:missing":
        print(f"build_sim_runtime: no {compiler}; the simulator runtime will be built on first use")
        return 0
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for line in pool.map(lambda arch: build(compiler, arch, args.out), args.arch):
            print(f"build_sim_runtime: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
