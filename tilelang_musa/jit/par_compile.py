"""`tilelang.jit.par_compile(programs)` and `JITFunction.par_compile(configs)`: compile many programs at once.

The builds run in forked worker processes, which fill the kernel cache; this process then loads each kernel from
it (a cache hit). Processes rather than threads: lowering is Python, and a worker that crashes takes only its own
program down. With the cache off, or where processes cannot fork, the programs compile here one after another.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import traceback
from typing import Any, Callable, Sequence

from . import cache
from .compile import compile as compile_program
from .kernel import JITKernel

logger = logging.getLogger("tilelang")

_pending: list[Callable[[], Any]] = []  # the builds of the current par_compile, read by the forked workers


def _build(index: int) -> str | None:
    try:
        _pending[index]()
        return None
    except Exception:  # noqa: BLE001 - the parent reports it, for this program
        return traceback.format_exc()


def par_compile(programs: Sequence[Any], num_workers: int | None = None, ignore_error: bool = False,
                **options: Any) -> list[JITKernel | None]:
    """Compile every PrimFunc of `programs` with `tilelang.compile(program, **options)`, `num_workers` at a time
    (default: the CPUs), and return the kernels in order. `ignore_error`: a program that fails to compile logs a
    warning and gives None, instead of raising."""
    programs = list(programs)
    builds = [lambda p=p: compile_program(p, **options) for p in programs]
    errors: list[str | None] = [None] * len(builds)
    workers = min(len(builds), num_workers or os.cpu_count() or 1)
    if workers > 1 and cache.is_cache_enabled() and "fork" in multiprocessing.get_all_start_methods():
        _pending[:] = builds
        try:
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                errors = pool.map(_build, range(len(builds)), chunksize=1)
        finally:
            _pending.clear()
    kernels: list[JITKernel | None] = []
    for index, build in enumerate(builds):
        try:
            kernels.append(build())  # a cache hit after a worker built it; else the build itself, here
        except Exception as err:
            if not ignore_error:
                raise
            logger.warning("par_compile: program %d failed to compile: %s", index, errors[index] or err)
            kernels.append(None)
    return kernels
