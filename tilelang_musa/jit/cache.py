"""The kernel cache: compiled kernels on disk, keyed by everything that can change them, and in memory.

The key is computed without lowering anything: the program's structural hash (attributes included) and parameter
names, the target, the backend and its toolchain's identity (compiler binary path, size, mtime: no process is
run), the options (pass configs, compile flags, out_idx), the settings that change the build
(TILELANG_MCC_EXTRA_ARGS, the content of TILELANG_REPLACE_MUSAC and of the TILELANG_REPLACE_STAGES files), the
package version and the identity of the package's own code (build_identity.py: the digest an installed wheel's
build wrote into it, or a checkout's sources hashed by content, memoized by their stat; once per process). A hit reloads the entry's
`metadata.json` and library (`JITKernel.from_database`); a repeated compile in the same process returns the same
JITKernel from memory.

An entry is a directory `<cache>/<key>/` with the stage files (stages.py). It is built in a temporary directory
`<cache>/.<key>.<random>/` and moved into place with `os.replace`: a process that loses the race to another
building the same entry deletes its own copy and uses the winner's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from functools import cache
from pathlib import Path
from typing import Any, Callable

import tvm_ffi

from .. import env
from .._version import __version__
from ..errors import BuildError
from .build_identity import package_identity
from .stages import FORMAT, METADATA, REPLACEABLE, stage_file

_disabled_by_api = False
_memo: dict[tuple[str, str], Any] = {}  # (cache dir, key) -> JITKernel
_swept: set[Path] = set()
STALE_SECONDS = 3600  # a temporary entry this old belongs to a process that died while building it


def disable_cache() -> None:
    """Stop reading and writing the kernel cache in this process (`tilelang.disable_cache()`)."""
    global _disabled_by_api
    _disabled_by_api = True


def enable_cache() -> None:
    global _disabled_by_api
    _disabled_by_api = False


def is_cache_enabled() -> bool:
    return not _disabled_by_api and not env.DISABLE_CACHE.flag()


def clear_memory_cache() -> None:
    """Forget the kernels compiled in this process (the disk cache stays)."""
    _memo.clear()


def cache_dir() -> Path:
    return env.CACHE_DIR.path() or Path("~/.tilelang/cache").expanduser()


@cache
def package_digest() -> str:
    """The identity of the package's own code (Python modules, templates, native library): any change to them may
    change what a compile produces. Installed: the digest its wheel's build wrote; a checkout: its sources' content,
    memoized in the cache directory by their stat (build_identity.py)."""
    return package_identity(cache_dir())


def _file_digest(path: Path, what: str) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as err:
        raise FileNotFoundError(f"{what}={path}: {err.strerror}") from None


def replacement_files(kernel: str) -> dict[str, Path]:
    """Stage outputs that replace the generated ones for `kernel`: TILELANG_REPLACE_STAGES/<kernel>.<suffix>, and
    TILELANG_REPLACE_MUSAC for `mu`."""
    found = {}
    directory = env.REPLACE_STAGES.path()
    if directory is not None:
        for stage in REPLACEABLE:
            path = directory / stage_file(kernel, stage)
            if path.is_file():
                found[stage] = path
    musac = env.REPLACE_MUSAC.path()
    if musac is not None:
        found["mu"] = musac
    return found


def kernel_key(program: Any, kernel: str, target: Any, backend: Any, configs: dict, flags: tuple[str, ...],
               out_idx: Any) -> str:
    """The cache key of compiling `program` (named `kernel`) with these settings (see the module docstring)."""
    replaced = sorted((stage, _file_digest(path, env.REPLACE_MUSAC.name if stage == "mu" else
                                          env.REPLACE_STAGES.name))
                      for stage, path in replacement_files(kernel).items())
    parts = (
        FORMAT, __version__, package_digest(),
        tvm_ffi.structural_hash(program), [p.name for p in program.params],
        str(target), backend.name, backend.toolchain.identity(),
        sorted((key.value, repr(value)) for key, value in configs.items()), list(flags), repr(out_idx),
        env.MCC_EXTRA_ARGS.raw(), replaced, _source_anchor(program), _var_keyed_attrs(program),
        _printed_lines(program, configs),
    )
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:32]


def _var_keyed_attrs(program: Any) -> list:
    """The values of the program's attributes that map tensors to something (T.annotate_layout on a parameter:
    `tl.layout_annotations`), by parameter name. The structural hash of a map keyed by the parameters' Vars leaves
    its values out: two programs that differ only in a tensor's layout hashed alike and shared a cached kernel."""
    attrs = getattr(program, "attrs", None)
    if attrs is None:
        return []
    found = []
    for name in sorted(str(k) for k in attrs.keys()):
        value = attrs[name]
        if isinstance(value, tvm_ffi.Map):
            found.append((name, sorted((getattr(k, "name", str(k)), tvm_ffi.structural_hash(v))
                                       for k, v in value.items())))
    return found


def _printed_lines(program: Any, configs: dict) -> list:
    """With `#line` directives printed (tl.emit_line_directives), the user's line of every statement: the source
    itself names them. Without, a structurally equal program written on other lines shares the entry, whose line
    table is moved to its lines when a report needs it (ir/program_lines.py): no walk of the program on a hit."""
    if not any(getattr(key, "value", key) == "tl.emit_line_directives" and value for key, value in configs.items()):
        return []
    from ..ir.program_lines import program_lines

    return program_lines(program)


def _source_anchor(program: Any) -> tuple:
    """The user's file and line of the program's first statement. The structural hash ignores spans, but a cached
    kernel keeps its table of generated lines -> user lines (simulator reports name them): two identical kernels
    written in different places must not share it."""
    span = getattr(getattr(program, "body", None), "span", None)
    source = getattr(span, "source_name", None)
    return (source.name, span.line) if source is not None else ()


def memo_get(key: str) -> Any:
    return _memo.get((str(cache_dir()), key))


def memo_put(key: str, kernel: Any) -> None:
    _memo[(str(cache_dir()), key)] = kernel


def lookup(key: str) -> Path | None:
    """The entry directory for `key`, if one is complete on disk."""
    entry = cache_dir() / key
    return entry if (entry / METADATA).is_file() else None


def store(key: str | None, build: Callable[[Path], None]) -> Path:
    """Runs `build(directory)` and returns the directory with its files: the cache entry for `key`, or a fresh
    directory in TILELANG_TMP_DIR when `key` is None (cache off). `build` writes metadata.json last."""
    if key is None:
        tmp_root = env.TMP_DIR.path()
        tmp_root.mkdir(parents=True, exist_ok=True)
        directory = Path(tempfile.mkdtemp(prefix="tilelang_", dir=tmp_root))
        build(directory)
        return directory
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    _sweep_stale(root)
    final = root / key
    workdir = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=root))
    try:
        build(workdir)
    except Exception as err:
        if not isinstance(err, BuildError):  # a failed build keeps its source for the error message to point at
            shutil.rmtree(workdir, ignore_errors=True)
        raise
    try:
        os.replace(workdir, final)
    except OSError:
        # Another process stored this entry first (its files are equivalent): use it and delete ours. A directory
        # without metadata is no complete entry (e.g. an older cache format): replace it.
        if not (final / METADATA).is_file():
            shutil.rmtree(final, ignore_errors=True)
            try:
                os.replace(workdir, final)
                return final
            except OSError:
                pass
        shutil.rmtree(workdir, ignore_errors=True)
    return final


def _sweep_stale(root: Path) -> None:
    """Once per process and cache directory: delete temporary entries of processes that died while building."""
    if root in _swept:
        return
    _swept.add(root)
    now = time.time()
    for name in os.listdir(root):
        if name.startswith("."):
            path = root / name
            try:
                if now - path.stat().st_mtime > STALE_SECONDS:
                    shutil.rmtree(path, ignore_errors=True)
            except OSError:
                pass
