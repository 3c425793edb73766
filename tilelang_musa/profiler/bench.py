"""Timing a callable: `do_bench` (median/mean/quantiles of repeated runs, in milliseconds).

On a MUSA device the runs are timed with torch_musa events around the stream; in the simulator (CPU) with
a wall clock after each run (the simulator runs launches synchronously).
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence

import torch


def _synchronize(device: str) -> None:
    if device == "musa":
        torch.musa.synchronize()


def do_bench(fn: Callable[[], Any], n_warmup: int = 5, n_repeat: int = 20, quantiles: Sequence[float] | None = None,
             return_mode: str = "mean", device: str = "cpu", backend: str = "event", warmup: float | None = None,
             rep: float | None = None) -> float | list[float]:
    """Run `fn` `n_warmup` times, then time `n_repeat` runs; returns milliseconds per run (`return_mode`:
    "mean", "median", "min", "max"), or the given `quantiles` of the run times."""
    if return_mode not in ("mean", "median", "min", "max"):
        raise ValueError(f"do_bench: return_mode must be mean, median, min or max; got {return_mode!r}")
    del backend, warmup, rep  # accepted for upstream compatibility: counts are explicit here
    for _ in range(max(0, n_warmup)):
        fn()
    _synchronize(device)
    times = []
    for _ in range(max(1, n_repeat)):
        if device == "musa":
            start, end = torch.musa.Event(enable_timing=True), torch.musa.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    if quantiles is not None:
        ordered = sorted(times)
        return [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in quantiles]
    return {"mean": statistics.fmean, "median": statistics.median, "min": min, "max": max}[return_mode](times)
