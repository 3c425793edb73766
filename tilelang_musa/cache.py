"""Upstream TileLang's `tilelang.cache`: `cached(...)` (a compile through the kernel cache), `clear_cache()`, and
`_dispatch_map`, each execution backend's view of the cache (upstream keeps one cache per backend; ours is one
cache whose keys include the backend: jit/cache.py).
"""

from __future__ import annotations

import shutil
from typing import Any

from .jit import cache as _cache
from .jit import compile as _compile
from .jit.backend import BACKENDS, UPSTREAM_NAMES


class _MemoryCache:
    """The kernels of one backend compiled in this process (`clear()` forgets them; the disk cache stays)."""

    def __init__(self, backend: str):
        self._backend = backend

    def _keys(self) -> list:
        return [k for k, kernel in _cache._memo.items() if kernel.backend.name == self._backend]

    def clear(self) -> None:
        for key in self._keys():
            del _cache._memo[key]

    def __len__(self) -> int:
        return len(self._keys())


class KernelCache:
    """One execution backend's view of the kernel cache."""

    def __init__(self, backend: str):
        self.execution_backend = backend
        self._memory_cache = _MemoryCache(backend)

    def cached(self, func: Any, out_idx: Any = None, **options: Any) -> Any:
        return _compile(func, out_idx, execution_backend=self.execution_backend, **options)

    def clear_cache(self) -> None:
        self._memory_cache.clear()


def _view(name: str) -> KernelCache:
    # Upstream's device launcher names are our Cython launcher; "sim" is the simulator's.
    return KernelCache("cython" if name in UPSTREAM_NAMES else name)


_dispatch_map: dict[str, KernelCache] = {name: _view(name) for name in (*BACKENDS, *UPSTREAM_NAMES)}


def cached(func: Any = None, out_idx: Any = None, *, target: Any = None, target_host: Any = None,
           execution_backend: str | None = None, verbose: bool = False, pass_configs: dict | None = None,
           instruments: list | None = None, compile_flags: Any = None) -> Any:
    """`tilelang.compile` with upstream's `cached` signature (a compile is cached unless the cache is off)."""
    return _compile(func, out_idx, target=target, execution_backend=execution_backend or "auto",
                    pass_configs=pass_configs, instruments=instruments, verbose=verbose, target_host=target_host,
                    compile_flags=compile_flags)


def clear_cache() -> None:
    """Delete every cached kernel, in memory and on disk (TILELANG_CACHE_DIR)."""
    _cache.clear_memory_cache()
    shutil.rmtree(_cache.cache_dir(), ignore_errors=True)


__all__ = ["KernelCache", "cached", "clear_cache"]
