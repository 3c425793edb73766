"""The on-disk kernel cache: built libraries keyed by everything that can change them.

Key = sha256(source text, toolchain name and version, build command flags, the package version, the
content of every template/simulator header). Entries are written to a temporary directory and moved
into place with `os.replace`, so concurrent processes never see half-written files.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from functools import cache
from pathlib import Path
from typing import Callable

from .. import env
from .._paths import include_root

_disabled_by_api = False


def disable_cache() -> None:
    """Stop reading and writing the kernel cache in this process (`tilelang.disable_cache()`)."""
    global _disabled_by_api
    _disabled_by_api = True


def enable_cache() -> None:
    global _disabled_by_api
    _disabled_by_api = False


def is_cache_enabled() -> bool:
    return not _disabled_by_api and not env.DISABLE_CACHE.flag()


@cache
def _templates_digest() -> str:
    h = hashlib.sha256()
    root = include_root() / "tl_templates"
    for path in sorted(root.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def cache_key(*parts: str) -> str:
    from .. import __version__

    h = hashlib.sha256()
    for part in (__version__, _templates_digest(), *parts):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def cache_dir() -> Path:
    return env.CACHE_DIR.path() or Path("~/.tilelang/cache").expanduser()


def build_cached(key: str, filename: str, build: Callable[[Path], None]) -> Path:
    """Return the cached artifact `filename` for `key`, running `build(workdir)` to create it on a miss.

    `build` writes `filename` (and anything else worth keeping, e.g. the source) into `workdir`. With the
    cache disabled the artifact lives in a fresh temporary directory."""
    if not is_cache_enabled():
        workdir = Path(tempfile.mkdtemp(prefix="tilelang_"))
        build(workdir)
        return workdir / filename
    final = cache_dir() / key
    artifact = final / filename
    if artifact.is_file():
        return artifact
    final.parent.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=final.parent))
    build(workdir)
    try:
        os.replace(workdir, final)
    except OSError:  # another process won the race: its entry is equivalent
        pass
    return artifact if artifact.is_file() else workdir / filename
