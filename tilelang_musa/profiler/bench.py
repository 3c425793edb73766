"""`do_bench(fn, warmup=25, rep=100, ...)`: the time of one run of `fn`, in milliseconds, as upstream TileLang.

`warmup` and `rep` are time budgets in milliseconds, not counts: after one untimed call, five runs estimate the
time of one run, and the counts are `max(1, int(warmup / estimate))` warmup runs and `max(1, int(rep / estimate))`
timed runs (`_n_warmup` / `_n_repeat`, or their aliases `n_warmup` / `n_repeat`, fix a count instead when > 0).
Before every estimated and timed run a buffer as large as the cache is written, so that no run finds the previous
run's data in it. The result is `return_mode` ("mean", "median", "min", "max") of the run times, or, with
`quantiles`, those quantiles of them (one value for one quantile, else a list).

Where the runs happen:
- on a MUSA device, each timed run is bracketed by `torch.musa.Event`s on the current stream (device time); the
  flush buffer is `cache_size` MiB (256 by default, larger than any MUSA L2);
- in the CPU simulator, each run is timed with the wall clock (the simulator launches synchronously). That is the
  time the *simulator* takes, not device time, and the first such benchmark in a process says so once. The flush
  buffer is the host's last-level cache size.
"""

from __future__ import annotations

import logging
import sys
import time
from functools import cache
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

import torch

logger = logging.getLogger(__name__)

RETURN_MODES = ("min", "max", "mean", "median")
BACKENDS = ("event", "cupti", "cudagraph")
ESTIMATE_RUNS = 5
DEVICE_FLUSH_MIB = 256
_noted_wall_clock = False


def do_bench(
    fn: Callable[[], Any],
    warmup: float = 25,
    rep: float = 100,
    _n_warmup: int = 0,
    _n_repeat: int = 0,
    quantiles: Sequence[float] | None = None,
    fast_flush: bool = True,
    backend: Literal["event", "cupti", "cudagraph"] = "event",
    return_mode: Literal["min", "max", "mean", "median"] = "mean",
    device: int | str | torch.device | None = None,
    cache_size: int | None = None,
    early_stop_baseline: float | None = None,
    *,
    n_warmup: int | None = None,
    n_repeat: int | None = None,
) -> float | list[float]:
    """Milliseconds per run of `fn` (see the module docstring for the protocol).

    device: where `fn` runs: "musa" (or an int / torch.device of a MUSA device) times with MUSA events, "cpu" is
    the simulator and times with the wall clock; None: where kernels run (the backend execution_backend="auto"
    resolves to: the MUSA device, or the simulator where there is none or TILELANG_EXECUTION_BACKEND=sim).
    backend: "event" (the only device timer here; the simulator accepts and ignores all three upstream names).
    cache_size: the flush buffer in MiB (default: 256 on a device, the host's last-level cache in the simulator).
    early_stop_baseline: when the estimate already exceeds it (ms), the estimate is returned without timing.

        ms = do_bench(lambda: kernel(a, b), warmup=10, rep=50, return_mode="median")
        p20, p50, p80 = do_bench(lambda: kernel(a, b), quantiles=[0.2, 0.5, 0.8])
    """
    if return_mode not in RETURN_MODES:
        raise ValueError(f"do_bench: return_mode must be one of {', '.join(RETURN_MODES)}; got {return_mode!r}")
    if backend not in BACKENDS:
        raise ValueError(f"do_bench: backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
    if quantiles is not None and not all(0.0 <= float(q) <= 1.0 for q in quantiles):
        raise ValueError(f"do_bench: quantiles must lie in [0, 1]; got {list(quantiles)}")
    fixed_warmup = n_warmup if n_warmup is not None else _n_warmup
    fixed_repeat = n_repeat if n_repeat is not None else _n_repeat
    timer = _device_timer(device, backend) if _on_device(device) else _WallClock()
    flush = timer.flush_buffer(cache_size, fast_flush)

    fn()
    timer.synchronize()
    estimate = sum(timer.time_runs(fn, flush, ESTIMATE_RUNS)) / ESTIMATE_RUNS
    if early_stop_baseline is not None and estimate > early_stop_baseline:
        logger.debug("do_bench: estimate %.4f ms exceeds the baseline %.4f ms; not timed further",
                     estimate, early_stop_baseline)
        return [estimate] * len(quantiles) if quantiles is not None else estimate
    per_run = max(estimate, 1e-6)
    warmup_runs = fixed_warmup if fixed_warmup and fixed_warmup > 0 else max(1, int(warmup / per_run))
    timed_runs = fixed_repeat if fixed_repeat and fixed_repeat > 0 else max(1, int(rep / per_run))
    for _ in range(warmup_runs):
        fn()
    timer.synchronize()
    times = torch.tensor(timer.time_runs(fn, flush, timed_runs), dtype=torch.float64)
    if quantiles is not None:
        values = torch.quantile(times, torch.tensor([float(q) for q in quantiles], dtype=torch.float64)).tolist()
        return values[0] if len(values) == 1 else values
    return float(getattr(torch, return_mode)(times).item())


def _on_device(device: int | str | torch.device | None) -> bool:
    if device is None:
        return _kernels_run_on_device()
    if isinstance(device, int):
        return True
    return torch.device(device).type == "musa"


def _kernels_run_on_device() -> bool:
    """As execution_backend="auto" resolves: on the device where there is one, unless the simulator is forced."""
    from .. import env
    from ..target import musa_device_present

    return (env.EXECUTION_BACKEND.raw() or "").lower() != "sim" and musa_device_present()


class _WallClock:
    """The simulator: runs are synchronous, so the wall clock around one call is that run's time."""

    def __init__(self) -> None:
        global _noted_wall_clock
        if not _noted_wall_clock:
            _noted_wall_clock = True
            print("[tilelang] do_bench: no MUSA device; times are the CPU simulator's wall-clock time, "
                  "not MUSA device time", file=sys.stderr)

    def synchronize(self) -> None:
        pass

    def flush_buffer(self, cache_mib: int | None, fast_flush: bool) -> torch.Tensor:
        nbytes = cache_mib * 2**20 if cache_mib else host_last_level_cache_bytes()
        return torch.empty(nbytes // 4 if fast_flush else nbytes, dtype=torch.int32 if fast_flush else torch.int8)

    def time_runs(self, fn: Callable[[], Any], flush: torch.Tensor, count: int) -> list[float]:
        times = []
        for _ in range(count):
            flush.zero_()
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e3)
        return times


class _MusaEvents:
    """A MUSA device: each run bracketed by timing events on the current stream."""

    def __init__(self, device: int | str | torch.device | None) -> None:
        self.device = torch.device("musa", device) if isinstance(device, int) else torch.device(device or "musa")

    def synchronize(self) -> None:
        torch.musa.synchronize(self.device)

    def flush_buffer(self, cache_mib: int | None, fast_flush: bool) -> torch.Tensor:
        nbytes = (cache_mib or DEVICE_FLUSH_MIB) * 2**20
        return torch.empty(nbytes // 4 if fast_flush else nbytes, dtype=torch.int32 if fast_flush else torch.int8,
                           device=self.device)

    def time_runs(self, fn: Callable[[], Any], flush: torch.Tensor, count: int) -> list[float]:
        starts = [torch.musa.Event(enable_timing=True) for _ in range(count)]
        ends = [torch.musa.Event(enable_timing=True) for _ in range(count)]
        for start, end in zip(starts, ends):
            flush.zero_()
            start.record()
            fn()
            end.record()
        self.synchronize()
        return [start.elapsed_time(end) for start, end in zip(starts, ends)]


def _device_timer(device: int | str | torch.device | None, backend: str) -> _MusaEvents:
    if backend != "event":
        raise ValueError(f"do_bench: backend={backend!r} is not available on MUSA; use backend='event'")
    return _MusaEvents(device)


@cache
def host_last_level_cache_bytes() -> int:
    """The largest CPU cache of this machine (sysfs), or 32 MiB where that cannot be read."""
    sizes = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip().upper()
        except OSError:
            continue
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes) if sizes else 32 * 2**20

