"""How a simulator runtime is built and what it is valid for, with the standard library only.

Two builders share this recipe: the package's CMake build at install time (tools/build_sim_runtime.py, which loads
this file by path, without importing the package or TVM) and the lazy build of a development checkout
(sim_runtime.py). A runtime is valid for the compiler, the compile flags and the bytes of the simulator headers;
the key leaves out where the headers lie (the install-time build compiles the source tree's copy, kernels include
the installed one), since their bytes are in it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from functools import cache
from pathlib import Path

RUNTIME_SOURCE = Path("runtime") / "sim_runtime.cc"  # under the simulator headers
BUILD_FLAG = "-DTL_SIM_BUILD_RUNTIME=1"
LINK_FLAG = "-DTL_SIM_LINK_RUNTIME=1"
DEFAULT_COMPILER = "g++"  # TILELANG_SIM_CXX overrides it (env.py)
# The archs with a simulator (target.py's ArchInfo table; testing/test_sim_runtime_install.py keeps them equal).
ARCHS = {"mp_21": 210, "mp_22": 220, "mp_31": 310, "mp_32": 320}


def library_name(arch: str) -> str:
    return f"libtilelang_musa_sim_{arch}.so"


def base_flags(musa_arch: int, include_root: Path, headers: Path, timing_flags: list[str]) -> list[str]:
    """The flags of every simulator build for an arch, kernel or runtime: none of a kernel's own."""
    # -O1: most of a build is parsing the headers; -O2 took 20% longer to build for little faster running.
    return [
        "-std=c++17", "-O1", "-fPIC", "-pthread", f"-I{include_root}", f"-I{headers}",
        "-DTL_SIMULATOR=1", f"-D__MUSA_ARCH__={musa_arch}", f"-D__MUSA_ARCH_LIST__={musa_arch}",
        # a kernel taking a 64-byte-aligned MUtensorDescriptor by value draws gcc's note on an old ABI change,
        # which concerns calls across compiler versions: not ours (one compiler builds the whole library)
        "-Wno-psabi",
        # a * b + c rounds twice, whatever the host: g++ contracts it into one fma by default where the host has one
        # (aarch64, x86 with -mfma), which would make results depend on the machine (docs/SIMULATOR.md, "a * b + c")
        "-ffp-contract=off",
    ] + timing_flags  # the cycle model's figures (profile.h, profiler/arch_figures.py); used only when profiling


def compiler_identity(compiler: str, toolchain: str = "sim") -> str:
    """The compiler binary that builds (resolved path, size, mtime), without running it: what the kernel cache and
    the runtime key name a toolchain by (toolchains.Toolchain.identity spells every toolchain this way)."""
    found = shutil.which(compiler)
    if found is None:
        return f"{toolchain}:missing"
    real = os.path.realpath(found)
    try:
        st = os.stat(real)
    except OSError:
        return f"{toolchain}:{real}:unreadable"
    return f"{toolchain}:{real}:{st.st_size}:{st.st_mtime_ns}"


@cache
def headers_digest(headers: Path) -> str:
    """sha256 of every file under the simulator headers (the runtime's sources)."""
    h = hashlib.sha256()
    for path in sorted(p for p in headers.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(headers)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def runtime_key(compiler_identity: str, flags: list[str], include_root: Path, headers: Path) -> str:
    """What a runtime is valid for: the compiler, the compile flags (less the headers' location) and the headers'
    bytes."""
    where = {f"-I{include_root}": "-I<include_root>", f"-I{headers}": "-I<simulator_headers>"}
    text = repr((compiler_identity, [where.get(f, f) for f in flags], headers_digest(headers)))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def build_command(compiler: list[str], flags: list[str], headers: Path, arch: str, output: Path) -> list[str]:
    return compiler + flags + [BUILD_FLAG, "-shared", f"-Wl,-soname,{library_name(arch)}", "-x", "c++",
                               str(headers / RUNTIME_SOURCE), "-o", str(output)]
