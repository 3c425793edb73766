"""The simulator runtime: the part of the simulator every kernel library used to compile, built once.

`src/tl_templates/sim/runtime/sim_runtime.cc` compiles the simulator headers' launch path, scheduler, fibers,
watchdog, signal guard, race-detector set-up and profiler into `libtilelang_musa_sim_<arch>.so`; a kernel library
built with `-DTL_SIM_LINK_RUNTIME=1` calls into it (sim/launch.h's RuntimeLaunch) instead of carrying its own
copy, and shares its thread state (an initial-exec thread_local: threadIdx is one load). docs/SIMULATOR.md.

Kernel code and the runtime share objects, so they must see the same headers with the same flags: a runtime is
built from the simulator headers with the kernels' flags less the per-kernel ones, and keyed by the compiler, those
flags and the headers' bytes (sim_runtime_recipe.py). An installed package carries the runtimes its CMake build made
(`lib/sim_runtime/<key>/`, tools/build_sim_runtime.py); where none matches the key (a development checkout, edited
headers, another compiler), the first kernel build that needs one builds it into the kernel cache directory under
`sim_runtime/<key>/` (a few seconds, once), under a file lock so that concurrent processes build it once, written
to a temporary name and renamed so no process sees a partial file. Kernel libraries find their runtime again
through their RUNPATH, so an exported kernel (jit/aot.py) loads where that directory is.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from .._paths import include_root, package_dirs, simulator_headers
from ..errors import BuildError
from .sim_runtime_recipe import RUNTIME_SOURCE, build_command, library_name, runtime_key

RUNTIME_DIR = "sim_runtime"  # in the kernel cache directory, beside the kernels' entries
PREBUILT_DIR = Path("lib") / "sim_runtime"  # in the installed package: the runtimes CMake built at install time


def supported(headers: Path | None = None) -> bool:
    """Whether the simulator headers in use have a runtime (another revision's, via TILELANG_TEMPLATES, may not)."""
    return ((headers or simulator_headers()) / RUNTIME_SOURCE).is_file()


def prebuilt_library(key: str, arch: str) -> Path | None:
    """The runtime the package's install built for `key` (tools/build_sim_runtime.py), if there is one."""
    for directory in package_dirs():
        candidate = directory / PREBUILT_DIR / key / library_name(arch)
        if candidate.is_file():
            return candidate
    return None


_built: dict[str, Path] = {}


def runtime_library(compiler: list[str], compiler_identity: str, flags: list[str], arch: str) -> Path:
    """The runtime for kernels of `arch` compiled with `compiler + flags`: the installed one when it was built for
    them, else one built into the kernel cache (BuildError if it cannot be built)."""
    headers = simulator_headers()
    key = runtime_key(compiler_identity, flags, include_root(), headers)
    if key in _built:
        return _built[key]
    library = prebuilt_library(key, arch)
    if library is None:
        library = _cached_library(compiler, flags, headers, arch, key)
    _built[key] = library
    return library


def _cached_library(compiler: list[str], flags: list[str], headers: Path, arch: str, key: str) -> Path:
    """The runtime in the kernel cache, built there by the first process that needs it: it builds under an
    exclusive flock beside the library (released if it dies), and the others wait and take its file instead of
    compiling the same runtime at once (pytest-xdist's workers, parallel builds). The build writes a temporary
    file renamed into place, so a process that tests for the library without the lock never sees a partial one."""
    from .cache import cache_dir

    directory = cache_dir() / RUNTIME_DIR / key
    library = directory / library_name(arch)
    if library.is_file():
        return library
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / f"{library.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if library.is_file():  # built by the process that held the lock before us
            return library
        fd, temporary = tempfile.mkstemp(prefix=".", suffix=".so", dir=directory)
        os.close(fd)
        cmd = build_command(compiler, flags, headers, arch, Path(temporary))
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            os.unlink(temporary)
            raise BuildError(f"sim: building the simulator runtime failed (exit {proc.returncode})\n"
                             f"command: {shlex.join(cmd)}\n{proc.stderr.strip() or proc.stdout.strip()}")
        os.replace(temporary, library)
    return library


def link_flags(library: Path) -> list[str]:
    """What a kernel library's link line needs to use `library` (found again at load time through its RUNPATH)."""
    return ["-x", "none", str(library), f"-Wl,-rpath,{library.parent}"]
