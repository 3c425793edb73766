"""The Ray executor: each task a Ray task, on a local Ray instance or on a cluster, under the same contract as the
local executor (executors/__init__.py).

    executor = RayExecutor()      # as many tasks in flight as the cluster has CPUs
    executor.run_tasks(n_tasks, task, timeout, on_done)

Ray: imported when a run starts (an optional extra, `pip install "tilelang_musa[ray]"`). A run calls `ray.init()`
unless Ray is already initialized, so it joins the cluster at RAY_ADDRESS when that is set and otherwise starts a
local instance; call `ray.init(...)` first for other options (a runtime_env that ships your code, resources).

A Ray worker inherits nothing from this process, so what a task needs travels with it:
- the task itself, pickled here once, with cloudpickle: functions of an importable module by reference (the worker
  imports the module), lambdas, closures and `__main__`'s functions by value. A part that cannot be pickled is a
  TaskNotShippable error naming it (`ConfigTask.profile_args.ref_prog, closure variable `lock``), before anything
  runs.
- this process's TILELANG_* variables, forced ones included (env.exported()), which replace the worker's own
  TILELANG_* variables while the task runs: the same execution backend, target, kernel cache, simulator options.
- this process's sys.path, appended to the worker's (the entries that exist there), so that the modules the
  task's functions come from import there as here. On a cluster, give Ray your code (runtime_env working_dir /
  py_modules) or install it on the nodes.
- the text of the source files the task names in `task.source_files`: the frontend reads a kernel function's
  source (inspect.getsource), and a worker that lacks the file at that path reads the text shipped.

Deadline: a task still running `timeout` seconds after it was handed to Ray is killed (`ray.cancel(force=True)`)
and reported TIMED_OUT. No more tasks are in flight than the cluster has CPUs, so a task starts about when it is
handed over; a new worker's start-up (importing the package, a few seconds) counts. A task whose worker dies (a
segfault, os._exit, the OOM killer) is DIED: Ray does not retry it (max_retries=0).
"""

from __future__ import annotations

import functools
import io
import linecache
import os
import sys
import threading
import time
import traceback
import types
import uuid
from dataclasses import fields, is_dataclass
from typing import Any, Callable

from .. import env
from .local import DIED, RAISED, TIMED_OUT

INSTALL_HINT = 'pip install "tilelang_musa[ray]"'


class TaskNotShippable(TypeError):
    """A task that cannot be pickled for Ray workers; the message names the part that cannot."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError as err:
        raise ImportError(f"the Ray executor needs Ray, which is not installed: {INSTALL_HINT}") from err
    return ray


class RayExecutor:
    """Tasks as Ray tasks (see the module docstring). max_in_flight: tasks handed to Ray at a time (default: the
    cluster's CPUs over num_cpus); num_cpus: the CPUs Ray reserves for each task."""

    name = "ray"

    def __init__(self, max_in_flight: int | None = None, num_cpus: float = 1):
        if max_in_flight is not None and max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1; got {max_in_flight}")
        self.max_in_flight = max_in_flight
        self.num_cpus = num_cpus

    def __repr__(self) -> str:
        return f"RayExecutor(max_in_flight={self.max_in_flight}, num_cpus={self.num_cpus})"

    def run_tasks(self, n_tasks: int, task: Callable[[int], Any], timeout: float | None,
                  on_done: Callable[[int, Any, tuple[str, str] | None], None],
                  stop: threading.Event | None = None) -> None:
        ray = import_ray()
        blob = ship(task)  # before Ray starts: an unshippable task fails at once
        if n_tasks <= 0:
            return
        if not ray.is_initialized():
            ray.init()
        payload = ray.put({"blob": blob, "token": uuid.uuid4().hex, "env": env.exported(),
                           "sys_path": [os.path.abspath(p) for p in sys.path], "sources": _sources(task)})
        remote = _remote(ray).options(num_cpus=self.num_cpus)
        cap = self.max_in_flight or max(1, int(ray.cluster_resources().get("CPU", 1) // self.num_cpus))
        stopped = stop.is_set if stop is not None else (lambda: False)
        queue = list(range(n_tasks))
        running: dict[Any, tuple[int, float]] = {}  # ObjectRef -> (index, when handed to Ray)
        try:
            while (queue and not stopped()) or running:
                while queue and not stopped() and len(running) < cap:
                    i = queue.pop(0)
                    running[remote.remote(payload, i)] = (i, time.monotonic())
                if not running:
                    break
                wait = None
                if timeout:
                    wait = max(0.0, min(start for _, start in running.values()) + timeout - time.monotonic())
                ready, _ = ray.wait(list(running), num_returns=1, timeout=wait)
                if ready:  # and whatever else has finished meanwhile
                    ready, _ = ray.wait(list(running), num_returns=len(running), timeout=0)
                for ref in sorted(ready, key=lambda r: running[r][0]):
                    i, _ = running.pop(ref)
                    value, failure = _answer(ray, ref)
                    on_done(i, value, failure)
                if timeout:
                    now = time.monotonic()
                    for ref, (i, start) in list(running.items()):
                        if now - start >= timeout:
                            del running[ref]
                            _cancel(ray, ref)
                            on_done(i, None, (TIMED_OUT, f"did not finish within the {timeout:g} s timeout"))
        finally:
            for ref in running:
                _cancel(ray, ref)


def _answer(ray: Any, ref: Any) -> tuple[Any, tuple[str, str] | None]:
    try:
        kind, value = ray.get(ref)
    except ray.exceptions.RayTaskError as err:  # raised outside the task's own guard (its result did not unpickle)
        return None, (RAISED, str(err))
    except ray.exceptions.RayError as err:  # WorkerCrashedError, OutOfMemoryError, NodeDiedError, ...
        text = " ".join(str(err).split()) or "no detail"
        return None, (DIED, f"the Ray worker died ({type(err).__name__}: {text})")
    return (value, None) if kind == "ok" else (None, (kind, value))


def _cancel(ray: Any, ref: Any) -> None:
    try:
        ray.cancel(ref, force=True)
    except Exception:  # noqa: BLE001 - it finished meanwhile, or its worker is gone already
        pass


def _sources(task: Any) -> dict[str, str]:
    out = {}
    for path in getattr(task, "source_files", ()) or ():
        try:
            with open(path) as f:
                out[path] = f.read()
        except OSError:
            continue
    return out


# -- shipping: cloudpickle, with the part that does not pickle named


def ship(task: Any) -> bytes:
    """`task` pickled for Ray workers, or TaskNotShippable naming the part that cannot be pickled."""
    try:
        return dumps(task)
    except Exception as err:  # noqa: BLE001 - pickling raises TypeError, PicklingError, AttributeError, ...
        path, part, error = _unpicklable(task, type(task).__name__, dumps, err, 0)
        raise TaskNotShippable(
            f"cannot ship {path} ({type(part).__name__}) to Ray workers: {type(error).__name__}: {error}. A Ray task "
            "gets what it needs by pickling (cloudpickle): make it picklable, or use the local executor") from None


def dumps(obj: Any) -> bytes:
    """cloudpickle.dumps(obj), refusing TVM objects but targets: most do not pickle (some crash the process
    trying), and a task builds its kernels in the worker from Python values."""
    from ray import cloudpickle

    class Pickler(cloudpickle.CloudPickler):
        def reducer_override(self, obj: Any) -> Any:
            if _is_tvm_object(obj):
                raise TypeError(f"{type(obj).__module__}.{type(obj).__qualname__} is a TVM object, which does not "
                                "pickle: build it inside the task")
            return super().reducer_override(obj)

    buffer = io.BytesIO()
    Pickler(buffer, protocol=cloudpickle.DEFAULT_PROTOCOL).dump(obj)
    return buffer.getvalue()


def _is_tvm_object(obj: Any) -> bool:
    tvm_ffi = sys.modules.get("tvm_ffi")
    if tvm_ffi is None or not isinstance(obj, tvm_ffi.core.Object):
        return False
    target = getattr(sys.modules.get("tvm.target"), "Target", None)
    return target is None or not isinstance(obj, target)  # a Target pickles as its description


def _unpicklable(obj: Any, path: str, dumps: Callable[[Any], bytes], error: BaseException,
                 depth: int) -> tuple[str, Any, BaseException]:
    """The innermost part of `obj` (which fails to pickle with `error`) that fails too, with its path."""
    if depth < 8:
        for child_path, child in _parts(obj, path):
            try:
                dumps(child)
            except Exception as child_error:  # noqa: BLE001
                return _unpicklable(child, child_path, dumps, child_error, depth + 1)
    return path, obj, error


def _parts(obj: Any, path: str) -> list[tuple[str, Any]]:
    """The values `obj` pickles through, each with a readable path."""
    if is_dataclass(obj) and not isinstance(obj, type):
        return [(f"{path}.{f.name}", getattr(obj, f.name)) for f in fields(obj)]
    if isinstance(obj, dict):
        return [(f"{path}[{k!r}]", v) for k, v in obj.items()]
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [(f"{path}[{i}]", v) for i, v in enumerate(obj)]
    if isinstance(obj, functools.partial):
        return [(f"{path}.func", obj.func), (f"{path}.args", obj.args), (f"{path}.keywords", obj.keywords)]
    if isinstance(obj, types.MethodType):
        return [(f"{path}.__self__", obj.__self__), (f"{path}.__func__", obj.__func__)]
    if isinstance(obj, types.FunctionType):
        code = obj.__code__
        out = []
        for name, cell in zip(code.co_freevars, obj.__closure__ or ()):
            try:
                out.append((f"{path}, closure variable `{name}`", cell.cell_contents))
            except ValueError:  # an empty cell
                continue
        out += [(f"{path}, global `{name}`", obj.__globals__[name]) for name in code.co_names
                if name in obj.__globals__ and not isinstance(obj.__globals__[name], types.ModuleType)]
        out += [(f"{path}, defaults", obj.__defaults__), (f"{path}, keyword defaults", obj.__kwdefaults__)]
        return out
    state = getattr(obj, "__dict__", None)
    if isinstance(state, dict) and not isinstance(obj, (type, types.ModuleType)):
        return [(f"{path}.{k}", v) for k, v in state.items()]
    return []


# -- the worker side


_loaded: dict[str, Any] = {}  # token -> task: the last task shipped to this worker, unpickled once


def run_shipped_task(payload: dict[str, Any], index: int) -> tuple[str, Any]:
    """In a Ray worker: task `index` of the shipped task, as ("ok", value) or (RAISED, traceback)."""
    try:
        task = _unpack(payload)
    except BaseException:  # noqa: BLE001 - reported for this task
        return RAISED, ("the task could not be unpickled on the Ray worker (is every module its functions come from "
                        "importable there?):\n" + traceback.format_exc())
    try:
        return "ok", task(index)
    except BaseException:  # noqa: BLE001 - reported for this task
        return RAISED, traceback.format_exc()


def _unpack(payload: dict[str, Any]) -> Any:
    prepare_worker(payload["env"], payload["sys_path"], payload["sources"])
    token = payload["token"]
    if token not in _loaded:
        from ray import cloudpickle

        _loaded.clear()
        _loaded[token] = cloudpickle.loads(payload["blob"])
    return _loaded[token]


def prepare_worker(variables: dict[str, str], path: list[str], sources: dict[str, str]) -> None:
    """This worker's TILELANG_* variables become `variables`; `path` entries that exist here are appended to
    sys.path; the text of each of `sources` missing here is what the frontend reads for it."""
    for name in [k for k in os.environ if k.startswith("TILELANG_") and k not in variables]:
        del os.environ[name]
    os.environ.update(variables)
    for entry in path:
        if entry not in sys.path and os.path.exists(entry):
            sys.path.append(entry)
    for filename, text in sources.items():
        if not os.path.exists(filename):
            # an entry without a modification time: linecache keeps it, inspect.getsource reads it
            linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)


@functools.lru_cache(maxsize=None)
def _remote(ray: Any) -> Any:
    return ray.remote(max_retries=0)(run_shipped_task)
