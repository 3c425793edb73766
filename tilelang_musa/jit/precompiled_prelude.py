"""The simulator's precompiled prelude: the template includes every generated source starts with, parsed once.

Most of a simulator build is parsing: the device templates and the simulator model are ~70k lines after
preprocessing, the kernel a few dozen. So the host compiler precompiles the prelude (the `#include` lines that
open every generated source, `codegen.source.HEADER`) once per compiler, flag set and package version, and each
build force-includes it (`-include <dir>/prelude.h`, which gcc and clang satisfy from `prelude.h.gch` / `.pch`
beside it). The source's own includes of the same headers are then no-ops (`#pragma once`).

Correctness never depends on the precompiled file: a compiler that finds it unusable (different flags or macros)
parses `prelude.h` itself, which is the text the source starts with anyway. The files live in the kernel cache
directory under `sim_prelude/<key>/`; they are written to a temporary name and renamed, so a reader never sees a
partial file, and a process that finds the file missing precompiles it under a lock (`flock` on `.lock` beside
it), so concurrent processes (pytest-xdist's workers, parallel builds) wait for one precompilation instead of
each doing its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

PRELUDE_DIR = "sim_prelude"  # in the kernel cache directory, beside the kernels' entries
PRELUDE_NAME = "prelude.h"
_failed: set[str] = set()  # keys whose precompilation failed in this process: not retried


def prelude_header(compiler: list[str], flags: list[str], prelude: str, identity: str) -> Path | None:
    """The path to force-include for a build with `compiler + flags` of a source that starts with `prelude`
    (precompiling it first if needed), or None when it cannot be precompiled (the build then parses as usual)."""
    from .cache import cache_dir, package_digest

    key = hashlib.sha256(repr((identity, compiler, flags, prelude, package_digest())).encode()).hexdigest()[:24]
    directory = cache_dir() / PRELUDE_DIR / key
    header = directory / PRELUDE_NAME
    compiled = directory / (PRELUDE_NAME + (".pch" if _is_clang(compiler) else ".gch"))
    if compiled.is_file() and header.is_file():
        return header
    if key in _failed:
        return None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with _locked(directory / ".lock"):
            if compiled.is_file() and header.is_file():  # precompiled by another process while this one waited
                return header
            _write_atomically(header, prelude.encode())
            fd, temporary = tempfile.mkstemp(prefix=".", suffix=compiled.suffix, dir=directory)
            os.close(fd)
            # clang can also instantiate the templates the headers use once, here, instead of in every build
            instantiate = ["-fpch-instantiate-templates"] if _is_clang(compiler) else []
            cmd = compiler + flags + instantiate + ["-x", "c++-header", str(header), "-o", temporary]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                os.unlink(temporary)
                _failed.add(key)
                return None
            os.replace(temporary, compiled)
    except OSError:
        _failed.add(key)
        return None
    return header


@contextlib.contextmanager
def _locked(path: Path):
    """Holds an exclusive flock on `path` (released when the process dies, so a crashed holder blocks no one)."""
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _is_clang(compiler: list[str]) -> bool:
    return "clang" in os.path.basename(compiler[0])


def _write_atomically(path: Path, data: bytes) -> None:
    if path.is_file() and path.read_bytes() == data:
        return
    fd, temporary = tempfile.mkstemp(prefix=".", dir=path.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(temporary, path)
