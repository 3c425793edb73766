"""The local executor: one forked process per task, a few at a time, each under a deadline.

Each task runs in its own forked process: it inherits this process's state (the kernel function, closures,
ref_prog, captured inputs) without pickling, a task that hangs or crashes (a deadlocked simulated kernel, a
segfault) is killed or lost alone, and its deadline is enforced by killing it. A task returns a small picklable
value. Where the platform cannot fork, tasks run one after another in this process, without a deadline.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
import traceback
from multiprocessing.connection import wait
from typing import Any, Callable

# What a task that did not return reports, as (kind, text).
TIMED_OUT = "timeout"
DIED = "died"
RAISED = "raised"


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


class LocalExecutor:
    """Tasks in forked processes of this machine, `workers` at a time (see the module docstring)."""

    name = "local"

    def __init__(self, workers: int = 1):
        self.workers = max(1, int(workers))

    def run_tasks(self, n_tasks: int, task: Callable[[int], Any], timeout: float | None,
                  on_done: Callable[[int, Any, tuple[str, str] | None], None],
                  stop: threading.Event | None = None) -> None:
        run_tasks(n_tasks, task, self.workers, timeout, on_done, stop)

    def __repr__(self) -> str:
        return f"LocalExecutor(workers={self.workers})"


def run_tasks(n_tasks: int, task: Callable[[int], Any], workers: int, timeout: float | None,
              on_done: Callable[[int, Any, tuple[str, str] | None], None],
              stop: threading.Event | None = None) -> None:
    """Run `task(i)` for i in range(n_tasks), `workers` at a time, lowest index first. `on_done(i, value, failure)`
    is called in this process as each finishes: `failure` is None, or (TIMED_OUT | DIED | RAISED, text). Once
    `stop` is set no more tasks start."""
    stopped = stop.is_set if stop is not None else (lambda: False)
    if not can_fork():
        for i in range(n_tasks):
            if stopped():
                return
            try:
                value = task(i)
            except Exception:  # noqa: BLE001 - the task's failure is the config's, reported not raised
                on_done(i, None, (RAISED, traceback.format_exc()))
            else:
                on_done(i, value, None)
        return
    context = multiprocessing.get_context("fork")
    queue = list(range(n_tasks))
    running: dict[int, tuple[Any, Any, float]] = {}  # index -> (process, connection, start time)
    try:
        while (queue and not stopped()) or running:
            while queue and not stopped() and len(running) < workers:
                i = queue.pop(0)
                receiver, sender = context.Pipe(duplex=False)
                process = context.Process(target=_child, args=(task, i, sender), daemon=True)
                process.start()
                sender.close()
                running[i] = (process, receiver, time.monotonic())
            if not running:
                break
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
    except BaseException:  # noqa: BLE001 - reported to the parent, which records it for this task
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
