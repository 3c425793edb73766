"""The simulator runtime: the part of the simulator every kernel library used to compile, built once.

`src/tl_templates/sim/runtime/sim_runtime.cc` compiles the simulator headers' launch path, scheduler, fibers,
watchdog, signal guard, race-detector set-up and profiler into `libtilelang_musa_sim_<arch>.so`; a kernel library
built with `-DTL_SIM_LINK_RUNTIME=1` calls into it (sim/launch.h's RuntimeLaunch) instead of carrying its own
copy, and shares its thread state (an initial-exec thread_local: threadIdx is one load). docs/SIMULATOR.md.

Kernel code and the runtime share objects, so they must see the same headers with the same flags: the runtime is
built from the headers the kernels include (`_paths.simulator_headers()`), with the kernels' flags less the
per-kernel ones, and keyed by the compiler, those flags and the headers' bytes: built into the kernel cache
directory under `sim_runtime/<key>/` by the first kernel build that needs it (a few seconds, once), written to a
temporary name and renamed so concurrent builds race harmlessly. Kernel libraries find it again through their
RUNPATH, so an exported kernel (jit/aot.py) loads where that cache directory is.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import tempfile
from functools import cache
from pathlib import Path

from .._paths import simulator_headers
from ..errors import BuildError

RUNTIME_DIR = "sim_runtime"  # in the kernel cache directory, beside the kernels' entries
RUNTIME_SOURCE = Path("runtime") / "sim_runtime.cc"  # under simulator_headers()
BUILD_FLAG = "-DTL_SIM_BUILD_RUNTIME=1"
LINK_FLAG = "-DTL_SIM_LINK_RUNTIME=1"


def library_name(arch: str) -> str:
    return f"libtilelang_musa_sim_{arch}.so"


def supported(headers: Path | None = None) -> bool:
    """Whether the simulator headers in use have a runtime (another revision's, via TILELANG_TEMPLATES, may not)."""
    return ((headers or simulator_headers()) / RUNTIME_SOURCE).is_file()


@cache
def headers_digest(headers: Path) -> str:
    """sha256 of every file under the simulator headers (the runtime's sources)."""
    h = hashlib.sha256()
    for path in sorted(p for p in headers.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(headers)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def runtime_key(compiler_identity: str, flags: list[str], headers: Path) -> str:
    """What a runtime is valid for: the compiler, the compile flags and the headers' bytes."""
    text = repr((compiler_identity, list(flags), headers_digest(headers)))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def build_command(compiler: list[str], flags: list[str], headers: Path, arch: str, output: Path) -> list[str]:
    return compiler + flags + [BUILD_FLAG, "-shared", f"-Wl,-soname,{library_name(arch)}", "-x", "c++",
                               str(headers / RUNTIME_SOURCE), "-o", str(output)]


_built: dict[str, Path] = {}


def runtime_library(compiler: list[str], compiler_identity: str, flags: list[str], arch: str) -> Path:
    """The runtime for kernels of `arch` compiled with `compiler + flags` (BuildError if it cannot be built)."""
    headers = simulator_headers()
    key = runtime_key(compiler_identity, flags, headers)
    if key in _built:
        return _built[key]
    from .cache import cache_dir

    directory = cache_dir() / RUNTIME_DIR / key
    library = directory / library_name(arch)
    if not library.is_file():
        directory.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".", suffix=".so", dir=directory)
        os.close(fd)
        cmd = build_command(compiler, flags, headers, arch, Path(temporary))
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            os.unlink(temporary)
            raise BuildError(f"sim: building the simulator runtime failed (exit {proc.returncode})\n"
                             f"command: {shlex.join(cmd)}\n{proc.stderr.strip() or proc.stdout.strip()}")
        os.replace(temporary, library)
    _built[key] = library
    return library


def link_flags(library: Path) -> list[str]:
    """What a kernel library's link line needs to use `library` (found again at load time through its RUNPATH)."""
    return ["-x", "none", str(library), f"-Wl,-rpath,{library.parent}"]
