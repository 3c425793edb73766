"""Building handwritten `.mu` test kernels with the simulator toolchain, and calling them through ctypes.

The command is the package's own (tilelang_musa.jit.toolchains.SimToolchain), so these tests compile exactly
as generated kernels do."""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import subprocess
from pathlib import Path
from typing import Callable

from tilelang_musa.jit.toolchains import BuildRequest, SimToolchain
from tilelang_musa.target import ARCHS

SIM_HEADERS = Path(__file__).resolve().parents[1] / "src" / "tl_templates" / "sim" / "sim"


def run_header_program(program: str, workdir: Path, *, flags: tuple[str, ...] = ("-O1",), stdin: str | None = None
                       ) -> list[str]:
    """Build a standalone C++ `program` against the simulator's own headers (baseline x86-64, as kernels build),
    run it, and return its stdout split into words: how the tests of one header's numerics check it in isolation."""
    source, binary = workdir / "program.cc", workdir / "program"
    source.write_text(program)
    subprocess.run(["g++", "-std=c++17", *flags, "-march=x86-64", f"-I{SIM_HEADERS}", str(source), "-o", str(binary)],
                   check=True)
    return subprocess.run([str(binary)], input=stdin, capture_output=True, text=True, check=True).stdout.split()


def sim_compile_command(source: Path, output: Path, arch: int, extra: tuple[str, ...] = ()) -> list[str]:
    """The simulator backend's compile command for one `.mu` file; `arch` is __MUSA_ARCH__ (220, 310, ...)."""
    info = next(a for a in ARCHS.values() if a.musa_arch == arch)
    return SimToolchain().command(BuildRequest(Path(source), Path(output), info, extra_flags=tuple(extra)))


def build_shared(directory: Path, name: str, command: Callable[[Path], list[str]]) -> tuple[Path | None, str]:
    """Run `command(output)`, the build of one library, once per test session: `directory` is shared by the session's
    processes (conftest.py's `session_dir`), so pytest-xdist's workers, whose module fixtures each ask for the same
    kernels, build each once. The first to ask builds under a lock (flock beside the file) and renames the result
    into place; the others wait for it and take that file. Builds are named by their command (less the output path),
    so different flags or environments never share one. Returns (library, "") or (None, the compiler's stderr)."""
    key = hashlib.sha256("\0".join(command(Path("OUTPUT"))).encode()).hexdigest()[:16]
    directory.mkdir(parents=True, exist_ok=True)
    output = directory / f"{name}_{key}.so"
    with open(directory / f"{name}_{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if output.is_file():
            return output, ""
        partial = directory / f".{output.name}.{os.getpid()}"
        proc = subprocess.run(command(partial), capture_output=True, text=True)
        if proc.returncode != 0:
            partial.unlink(missing_ok=True)
            return None, proc.stderr
        os.replace(partial, output)
        return output, ""


class SimLibrary:
    """A compiled kernel library: attribute access returns its C functions (int result by default)."""

    def __init__(self, path: Path, source: Path | None = None):
        self.source = source
        self._lib = ctypes.CDLL(str(path))
        self._lib.get_last_error.restype = ctypes.c_char_p

    def __getattr__(self, name):
        return getattr(self._lib, name)

    def error(self) -> str:
        return self._lib.get_last_error().decode()

    def line_of(self, snippet: str) -> int:
        """1-based line of the first source line containing `snippet` (messages cite source lines)."""
        for number, text in enumerate(self.source.read_text().splitlines(), start=1):
            if snippet in text:
                return number
        raise AssertionError(f"{snippet!r} is not in {self.source.name}")
