"""JIT phase diagnostics, at upstream's import path `tilelang.jit.diagnostics`.

    TILELANG_JIT_DIAGNOSTICS=1 python my_kernel.py   # INFO records on logger "tilelang.jit.diagnostics"

`jit_phase(name, **context)` logs the start, the end (with the elapsed time) or the failure of a phase, with the
context as `key=value`; tilelang.compile wraps each of its stages (compile.py) in one. Off, it logs nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from .. import env

logger = logging.getLogger("tilelang.jit.diagnostics")


def diagnostics_enabled(*, verbose: bool = False) -> bool:
    return bool(verbose) or env.JIT_DIAGNOSTICS.flag()


def _context(context: dict[str, object]) -> str:
    return "".join(f" {key}={value!r}" for key, value in sorted(context.items()))


@contextmanager
def jit_phase(name: str, *, enabled: bool | None = None, verbose: bool = False, **context: object) -> Iterator[None]:
    """Log phase `name` (see the module docstring); the exception of a failing phase propagates unchanged."""
    if not (diagnostics_enabled(verbose=verbose) if enabled is None else enabled):
        yield
        return
    detail, start = _context(context), time.monotonic()
    logger.info("TileLang JIT phase start: %s%s", name, detail)
    try:
        yield
    except BaseException:
        logger.exception("TileLang JIT phase failed: %s elapsed=%.3fs%s", name, time.monotonic() - start, detail)
        raise
    logger.info("TileLang JIT phase done: %s elapsed=%.3fs%s", name, time.monotonic() - start, detail)
