"""Persisted tuning results: `$TILELANG_CACHE_DIR/autotuner/<key>.json`.

The key hashes everything that can change a tuning run's answer: the package version, the kernel function
(its source, defaults and closure values), the problem (the call's arguments; tensors by dtype and shape), the
configs, the compile arguments (resolved target and execution backend, out_idx, pass configs) and the profile
arguments, callbacks included (ref_prog, supply_prog, manual_check_prog, cost_model: by source and closure).
A value that cannot be fingerprinted (say, an object whose text shows only its address) makes the run
unpersistable: it is tuned and not written, and the tuner says why once. Module globals a function reads are
not part of the key, as upstream.

A record names the best config by its index in the configs (the key fixes the list) and keeps every config's
trial. Records are written to a temporary file and moved into place with `os.replace`. The kernels themselves
stay in the kernel cache: reading a record back compiles only the best config, whose library the kernel cache
already holds.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import inspect
import json
import marshal
import math
import os
import re
import tempfile
import types
from pathlib import Path
from typing import Any

import torch

from .. import env
from .param import Trial

RECORD_FORMAT = 1
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


class NotPersistable(Exception):
    """A key input has no stable fingerprint; the message names it."""


def persistence_enabled() -> bool:
    from ..jit import is_cache_enabled

    return is_cache_enabled() and not env.AUTO_TUNING_DISABLE_CACHE.flag()


def results_dir() -> Path:
    return (env.CACHE_DIR.path() or Path("~/.tilelang/cache").expanduser()) / "autotuner"


def result_key(parts: dict[str, Any]) -> str:
    """sha256 of the fingerprints of `parts` (raises NotPersistable)."""
    text = json.dumps(fingerprint(parts), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def fingerprint(value: Any, _seen: frozenset[int] = frozenset()) -> Any:
    """A JSON-able value equal across processes for equal inputs, or NotPersistable."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return repr(value)  # NaN and infinities too
    if isinstance(value, enum.Enum):
        return f"{type(value).__qualname__}.{value.name}"
    if id(value) in _seen:
        return "<recursive>"
    seen = _seen | {id(value)}
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, *(fingerprint(v, seen) for v in value)]
    if isinstance(value, dict):
        return ["dict", *sorted(([str(k), fingerprint(v, seen)] for k, v in value.items()), key=lambda kv: kv[0])]
    if isinstance(value, torch.Tensor):
        data = value.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes()
        return ["tensor", str(value.dtype), list(value.shape), hashlib.sha256(data).hexdigest()]
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, functools.partial):
        return ["partial", fingerprint(value.func, seen), fingerprint(value.args, seen),
                fingerprint(value.keywords, seen)]
    if isinstance(value, types.MethodType):
        return ["method", fingerprint(value.__func__, seen), fingerprint(value.__self__, seen)]
    if isinstance(value, types.FunctionType):
        return _function_fingerprint(value, seen)
    if isinstance(value, (types.BuiltinFunctionType, type)):
        return ["named", getattr(value, "__module__", None), value.__qualname__]
    wrapped = getattr(value, "__wrapped__", None)  # a decorated function (tilelang.jit) is its function
    if isinstance(wrapped, types.FunctionType):
        return ["wrapped", type(value).__qualname__, _function_fingerprint(wrapped, seen)]
    text = str(value)
    if _ADDRESS.search(text):
        raise NotPersistable(f"{type(value).__qualname__} value {text[:60]!r} has no stable fingerprint")
    return ["str", type(value).__qualname__, text]


def _function_fingerprint(func: types.FunctionType, seen: frozenset[int]) -> list[Any]:
    try:
        code = inspect.getsource(func)
    except (OSError, TypeError):  # defined where no source is kept: its bytecode then
        code = hashlib.sha256(marshal.dumps(func.__code__)).hexdigest()
    closure = {}
    for name, cell in zip(func.__code__.co_freevars, func.__closure__ or ()):
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell (a name assigned after the function was made)
            continue
        try:
            closure[name] = fingerprint(contents, seen)
        except NotPersistable as err:
            raise NotPersistable(f"{func.__qualname__}: closure variable `{name}`: {err}") from None
    return ["function", func.__module__, func.__qualname__, code, fingerprint(func.__defaults__, seen),
            fingerprint(func.__kwdefaults__, seen), closure]


def load(key: str, n_configs: int) -> dict[str, Any] | None:
    """The record for `key` if there is a readable one that fits `n_configs` configs; else None."""
    path = results_dir() / f"{key}.json"
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    trials = record.get("trials")
    best = record.get("best_index")
    if (record.get("format") != RECORD_FORMAT or not isinstance(trials, list) or len(trials) != n_configs
            or not isinstance(best, int) or not 0 <= best < n_configs):
        return None
    return record


def save(key: str, best_index: int, latency: float, ref_latency: float, latency_source: str,
         trials: list[Trial]) -> Path:
    directory = results_dir()
    directory.mkdir(parents=True, exist_ok=True)
    record = {
        "format": RECORD_FORMAT,
        "best_index": best_index,
        "best_config": repr(trials[best_index].config),  # for a reader; the configs list is the truth
        "latency": _number(latency),
        "ref_latency": _number(ref_latency),
        "latency_source": latency_source,
        "trials": [{"index": t.index, "status": t.status, "error": t.error, "latency": _number(t.latency)}
                   for t in trials],
    }
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{key}.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(record, f, indent=1)
    path = directory / f"{key}.json"
    os.replace(tmp, path)
    return path


def _number(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def trials_from_record(record: dict[str, Any], configs: list[dict[str, Any]]) -> list[Trial]:
    return [Trial(index=i, config=configs[i], status=t["status"], error=t.get("error"),
                  latency=math.nan if t.get("latency") is None else float(t["latency"]))
            for i, t in enumerate(record["trials"])]
