"""Where the autotuner evaluates its configs: an executor (tilelang_musa/executors), and how many at a time.

executor= of AutoTuner / @autotune, else TILELANG_AUTO_TUNING_EXECUTOR, else "local":
  "local"   one forked process per config, a few at a time, each under the run's timeout (executors/local.py)
  "ray"     one Ray task per config, on a local Ray instance or the cluster at RAY_ADDRESS (executors/ray_executor.py;
            `pip install "tilelang_musa[ray]"`); as many at a time as the cluster has CPUs
  or an executor object (e.g. RayExecutor(max_in_flight=64)).

How many local processes at a time, with upstream's variables:
  TILELANG_AUTO_TUNING_CPU_COUNTS      > 0: that many (at most the CPUs available); -1 (default): automatic
  TILELANG_AUTO_TUNING_CPU_UTILITIES   automatic: this fraction of the available CPUs (default 0.9), at least 1
  TILELANG_AUTO_TUNING_MAX_CPU_COUNT   > 0: never more than this
"""

from __future__ import annotations

from typing import Any

from .. import env
from ..executors import EXECUTORS, Executor, LocalExecutor, executor_named
from ..executors.local import DIED, RAISED, TIMED_OUT, available_cpus, can_fork, run_tasks

__all__ = ["DIED", "RAISED", "TIMED_OUT", "available_cpus", "can_fork", "check_executor", "executor_for",
           "run_tasks", "worker_count"]


def worker_count(n_tasks: int) -> int:
    cpus = available_cpus()
    counts = int(env.AUTO_TUNING_CPU_COUNTS.raw() or -1)
    workers = min(counts, cpus) if counts > 0 else max(1, int(cpus * float(env.AUTO_TUNING_CPU_UTILITIES.raw() or 0.9)))
    cap = int(env.AUTO_TUNING_MAX_CPU_COUNT.raw() or -1)
    if cap > 0:
        workers = min(workers, cap)
    return max(1, min(workers, n_tasks))


def check_executor(spec: Any) -> Any:
    """`spec` (None, a name or an executor) if it names an executor; else a ValueError naming the known ones."""
    if spec is None or not isinstance(spec, str):
        return executor_named(spec) if spec is not None else None
    if spec.strip().lower() not in EXECUTORS:
        raise ValueError(f"autotune: unknown executor {spec!r}; known: {', '.join(map(repr, EXECUTORS))}")
    return spec


def executor_for(spec: Any, n_tasks: int) -> Executor:
    """The executor of a tuning run of `n_tasks` configs: `spec`, else $TILELANG_AUTO_TUNING_EXECUTOR, else local."""
    if spec is None:
        name = (env.AUTO_TUNING_EXECUTOR.raw() or "local").strip().lower()
        if name not in EXECUTORS:
            raise ValueError(f"TILELANG_AUTO_TUNING_EXECUTOR={name!r} names no executor; known: "
                             f"{', '.join(map(repr, EXECUTORS))}")
        spec = name
    if isinstance(spec, str) and spec.strip().lower() == "local":
        return LocalExecutor(worker_count(n_tasks))
    return executor_named(check_executor(spec))
