"""Run many independent tasks away from this process, each under a deadline: the contract the autotuner and the
fuzzer share, and its two executors.

    executor = executor_named("ray")          # or "local", or LocalExecutor(workers=4), RayExecutor(...)
    executor.run_tasks(n_tasks, task, timeout, on_done)

`task(i)` computes task i's value (small and picklable); `on_done(i, value, failure)` is called in this process as
each task finishes, `failure` being None or (kind, text): TIMED_OUT (killed past `timeout` seconds; None: no
deadline), DIED (its process ended without an answer: a segfault, os._exit, the OOM killer) or RAISED (the text is
the traceback). A set `stop` event starts no more tasks; those running finish and are reported.

- "local" (local.py): one forked process per task, a few at a time; the task is inherited, never pickled.
- "ray" (ray_executor.py): one Ray task per task, on a local Ray instance or the cluster at RAY_ADDRESS; the task
  is pickled (cloudpickle) and shipped with this process's TILELANG_* environment. Ray is an optional extra:
  `pip install "tilelang_musa[ray]"`.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Protocol

from .local import DIED, RAISED, TIMED_OUT, LocalExecutor, available_cpus
from .ray_executor import INSTALL_HINT, RayExecutor, TaskNotShippable

OnDone = Callable[[int, Any, "tuple[str, str] | None"], None]
EXECUTORS = ("local", "ray")


class Executor(Protocol):
    name: str

    def run_tasks(self, n_tasks: int, task: Callable[[int], Any], timeout: float | None, on_done: OnDone,
                  stop: threading.Event | None = None) -> None: ...


def executor_named(spec: "str | Executor", workers: int | None = None) -> "Executor":
    """The executor `spec` names ("local": `workers` processes at a time, default one per available CPU; "ray":
    as many tasks at a time as the Ray cluster has CPUs), or `spec` itself when it is an executor."""
    if not isinstance(spec, str):
        if not callable(getattr(spec, "run_tasks", None)):
            raise TypeError(f"an executor is one of {', '.join(map(repr, EXECUTORS))} or an object with run_tasks(); "
                            f"got {spec!r}")
        return spec
    name = spec.strip().lower()
    if name == "local":
        return LocalExecutor(workers or available_cpus())
    if name == "ray":
        return RayExecutor()
    raise ValueError(f"unknown executor {spec!r}; known: {', '.join(map(repr, EXECUTORS))}")


__all__ = ["DIED", "EXECUTORS", "Executor", "INSTALL_HINT", "LocalExecutor", "RAISED", "RayExecutor", "TIMED_OUT",
           "TaskNotShippable", "available_cpus", "executor_named"]
