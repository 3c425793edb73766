"""Performance-regression entry points of upstream's example scripts:

    def regression_gemm():                       # in an example module
        tilelang.testing.process_func(bench_gemm, M=4096)   # records bench_gemm(M=4096)'s latency
    if __name__ == "__main__":
        tilelang.testing.regression()            # runs every regression_* function here, prints the latencies

Output: one "name: latency" line per result, or, with TL_PERF_REGRESSION_FORMAT=json (the variable upstream's
collectors set), one line `__TILELANG_PERF_RESULTS_JSON__=[{"name": ..., "latency": ...}, ...]`.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["PerfResult", "process_func", "regression", "results"]

RESULTS_JSON_PREFIX = "__TILELANG_PERF_RESULTS_JSON__="
_MAX_ATTEMPTS = 6  # a latency <= 0 (a timer glitch) is measured again, up to this many runs in all
_results: list["PerfResult"] = []


@dataclass(frozen=True)
class PerfResult:
    name: str
    latency: float


def results() -> list[PerfResult]:
    """The latencies recorded since the last `regression()` started (a copy)."""
    return list(_results)


def process_func(func: Callable[..., float], name: str | None = None, /, **kwargs: Any) -> None:
    """Run `func(**kwargs)`, which returns a latency (any unit; only ratios matter), and record it under `name`
    (default: func's module; a "regression_" prefix is dropped). A latency <= 0 is measured again; if it stays
    <= 0 nothing is recorded and a RuntimeWarning says so."""
    label = name if name is not None else getattr(func, "__module__", None) or "<unknown>"
    label = label.removeprefix("regression_")
    latency = 0.0
    for _ in range(_MAX_ATTEMPTS):
        latency = float(func(**kwargs))
        if latency > 0:
            _results.append(PerfResult(label, latency))
            return
    warnings.warn(f"{label}: latency {latency} <= 0 after {_MAX_ATTEMPTS} runs; not recorded", RuntimeWarning,
                  stacklevel=2)


def regression(prefixes: Sequence[str] = ("regression_",), verbose: bool = True) -> None:
    """Run every callable of the calling module whose name starts with one of `prefixes` (in name order, warnings
    and log messages below ERROR silenced), then print the latencies they recorded with `process_func`."""
    caller = inspect.currentframe().f_back.f_globals  # type: ignore[union-attr]
    entries = sorted((name, fn) for name, fn in caller.items() if callable(fn) and name.startswith(tuple(prefixes)))
    _results.clear()
    for i, (name, fn) in enumerate(entries, 1):
        if verbose:
            print(f"  [{i}/{len(entries)}] {name.removeprefix('regression_')}", end="", flush=True)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logging.disable(logging.WARNING)
            try:
                fn()
            finally:
                logging.disable(logging.NOTSET)
        if verbose:
            print(f" ({time.perf_counter() - start:.2f}s)", flush=True)
    if os.environ.get("TL_PERF_REGRESSION_FORMAT", "text").strip().lower() == "json":
        print(RESULTS_JSON_PREFIX + json.dumps([asdict(r) for r in _results], separators=(",", ":")))
    else:
        for r in _results:
            print(f"{r.name}: {r.latency}")
