"""Run one task per config in worker processes, a few at a time, each under a deadline.

Each task runs in its own forked process: it inherits the tuner's state (the kernel function, closures, ref_prog,
captured inputs) without pickling, a task that hangs or crashes (a deadlocked simulated kernel, a segfault) is
killed or lost alone, and its deadline is enforced by killing it. A task returns a small picklable value. Where
the platform cannot fork, tasks run one after another in this process, without a deadline.

How many at a time, with upstream's variables:
  TILELANG_AUTO_TUNING_CPU_COUNTS      > 0: that many (at most the CPUs available); -1 (default): automatic
  TILELANG_AUTO_TUNING_CPU_UTILITIES   automatic: this fraction of the available CPUs (default 0.9), at least 1
  TILELANG_AUTO_TUNING_MAX_CPU_COUNT   > 0: never more than this
"""

from __future__ import annotations

import multiprocessing
import os
import time
import traceback
from multiprocessing.connection import wait
from typing import Any, Callable

from .. import env


# What a task that did not return reports, as (kind, text).
TIMED_OUT = "timeout"
DIED = "died"
RAISED = "raised"


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_count(n_tasks: int) -> int:
    cpus = available_cpus()
    counts = int(env.AUTO_TUNING_CPU_COUNTS.raw() or -1)
    workers = min(counts, cpus) if counts > 0 else max(1, int(cpus * float(env.AUTO_TUNING_CPU_UTILITIES.raw() or 0.9)))
    cap = int(env.AUTO_TUNING_MAX_CPU_COUNT.raw() or -1)
    if cap > 0:
        workers = min(workers, cap)
    return max(1, min(workers, n_tasks))


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def run_tasks(n_tasks: int, task: Callable[[int], Any], workers: int, timeout: float | None,
              on_done: Callable[[int, Any, tuple[str, str] | None], None]) -> None:
    """Run `task(i)` for i in range(n_tasks), `workers` at a time, lowest index first. `on_done(i, value, failure)`
    is called in this process as each finishes: `failure` is None, or (TIMED_OUT | DIED | RAISED, text)."""
    if not can_fork():
        for i in range(n_tasks):
            try:
                on_done(i, task(i), None)
            except Exception:  # noqa: BLE001 - the task's failure is the config's, reported not raised
                on_done(i, None, (RAISED, traceback.format_exc()))
        return
    context = multiprocessing.get_context("fork")
    queue = list(range(n_tasks))
    running: dict[int, tuple[Any, Any, float]] = {}  # index -> (process, connection, start time)
    try:
        while queue or running:
            while queue and len(running) < workers:
                i = queue.pop(0)
                receiver, sender = context.Pipe(duplex=False)
                process = context.Process(target=_child, args=(task, i, sender), daemon=True)
                process.start()
                sender.close()
                running[i] = (process, receiver, time.monotonic())
            deadline = None if not timeout else min(start for _, _, start in running.values()) + timeout
            ready = wait([conn for _, conn, _ in running.values()],
                         timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
            for i, (process, conn, start) in list(running.items()):
                if conn in ready:
                    try:
                        kind, value = conn.recv()
                    except EOFError:  # the process ended without an answer: killed by a signal, or os._exit
                        process.join()
                        kind, value = DIED, f"the worker process exited with code {process.exitcode}"
                    _finish(running.pop(i), kill=False)
                    if kind == "ok":
                        on_done(i, value, None)
                    else:
                        on_done(i, None, (kind, value))
                elif timeout and time.monotonic() - start >= timeout:
                    _finish(running.pop(i))
                    on_done(i, None, (TIMED_OUT, f"did not finish within the {timeout:g} s timeout"))
    finally:
        for entry in running.values():
            _finish(entry)


def _child(task: Callable[[int], Any], index: int, conn: Any) -> None:
    _quiet_threads()
    try:
        result = ("ok", task(index))
    except BaseException:  # noqa: BLE001 - reported to the parent, which records it for this config
        result = (RAISED, traceback.format_exc())
    conn.send(result)
    conn.close()


def _quiet_threads() -> None:
    """One intra-op thread in a forked worker: the parent's OpenMP pool does not survive fork, and the workers
    already share the CPUs."""
    import torch

    torch.set_num_threads(1)


def _finish(entry: tuple[Any, Any, float], kill: bool = True) -> None:
    """Close the pipe and reap the process: one that answered gets a moment to exit; the rest are killed."""
    process, conn, _ = entry
    conn.close()
    if not kill:
        process.join(10)
    if process.is_alive():
        process.terminate()
        process.join(2)
        if process.is_alive():
            process.kill()
    process.join()
