"""Reducers: `T.alloc_reducer`, `T.reducer_init`, `T.reducer_update`, `T.finalize_reducer`.

    r = T.alloc_reducer((N,), "float32", op="sum")
    T.reducer_init(r)                             # or T.reducer_init(r, seed)
    for i, j in T.Parallel(M, N):
        T.reducer_update(r[j], x[i, j])
    total = T.alloc_fragment((N,), "float32")
    T.finalize_reducer(r, total)                  # total holds the sums over i

Every thread holds the whole reducer and adds its own iterations' contributions (no atomics, no barriers), and
`T.finalize_reducer` combines the partials across the block (tileop/finalize_reducer.py), then the epoch's
seed once. An epoch's rules (one init, updates inside T.Parallel loops, one finalize into a destination, no
other access to the reducer) are reducer_epoch.py's. The legacy spelling (upstream's deprecated v1) is still
accepted on a reducer no epoch operation touches: `T.fill(r, 0)` / `T.clear(r)`, `r[j] += x[i, j]`, an in-place
`T.finalize_reducer(r)` after which r holds the totals. Filling a sum or bitxor reducer with anything but 0 is
rejected: every thread's partial would carry the value, so the total would count it once per thread.
`replication` is accepted for upstream's scripts: both of its strategies give the same values here, where the
partials are always replicated.
"""
from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from ..errors import ReducerDtypeError
from ..tileop import emit_tile_op
from ..tileop.finalize_reducer import FinalizeReducer
from ..tileop.reduce import BITWISE_KINDS, _combine, _identity
from .allocate import alloc_fragment
from .builder import as_expr, current_trace, is_buffer
from .reducer_epoch import Epoch, close_epoch, internal_access, note_legacy_access, note_update, open_epoch
from .runtime import store

REDUCER_OPS = ("sum", "max", "min", *BITWISE_KINDS)


def alloc_reducer(shape: Any, dtype: Any, op: str = "sum", replication: str | None = None) -> Any:
    """A reducer of the given shape (see the module docstring); `op` is "sum", "max", "min" (or, on integers,
    "bitand", "bitor", "bitxor")."""
    trace = current_trace("T.alloc_reducer")
    if op not in REDUCER_OPS:
        raise trace.error(f"T.alloc_reducer: op={op!r} is not one of {', '.join(REDUCER_OPS)}")
    if replication not in (None, "all", "none"):
        raise trace.error(f"T.alloc_reducer: replication={replication!r} must be 'all', 'none' or None")
    buf = alloc_fragment(shape, dtype)
    if op in BITWISE_KINDS and not str(buf.ty.dtype.dtype).startswith(("int", "uint")):
        raise ReducerDtypeError(f"T.alloc_reducer: op={op!r} needs an integer dtype; got {buf.ty.dtype.dtype}",
                                trace.loc)
    trace.reducers[buf] = op
    trace.reducer_epochs[buf] = Epoch()
    return buf


def _reducer(trace, construct: str, value: Any) -> Any:
    buf = value if is_buffer(value) else getattr(value, "source", None)
    if buf is None or buf not in trace.reducers:
        raise trace.error(f"{construct}: {value!r} is not a reducer (T.alloc_reducer)")
    return buf


def finalize_reducer(reducer: Any, dst: Any = None, batch: int = 1, annotations: dict | None = None) -> None:
    """Combine the reducer's per-thread partials into `dst` (an epoch's close), or, without `dst`, in place (the
    legacy spelling: afterwards every thread's copy holds the totals). `batch` elements share each cross-thread
    exchange (it must divide the reducer's size); upstream's `annotations={"batch": B}` spells the same."""
    trace = current_trace("T.finalize_reducer")
    buf = _reducer(trace, "T.finalize_reducer", reducer)
    from ..tileop.region import to_region

    for key, val in (annotations or {}).items():
        if key != "batch":
            raise trace.error(f"T.finalize_reducer: annotation {key!r} has no effect here; the one it takes is "
                              "'batch'")
        batch = val
    if not isinstance(batch, int) or batch < 1:
        raise trace.error(f"T.finalize_reducer: batch must be >= 1 (an integer), got {batch!r}")
    if dst is None:
        note_legacy_access(trace, buf, "an in-place T.finalize_reducer(acc)", store=False)
    else:
        close_epoch(trace, buf, dst)
    region, _ = to_region(buf, "T.finalize_reducer", "reducer")
    seed = trace.reducer_seeds.pop(buf, None)  # combined once, after the partials are
    emit_tile_op(FinalizeReducer.op_name, [region.to_ir()] + ([seed] if seed is not None else []),
                 {"kind": trace.reducers[buf], "batch": batch})
    if dst is not None:
        from .copy import copy

        with internal_access(trace, buf):
            copy(buf, dst)


def reducer_init(reducer: Any, init: Any = None) -> None:
    """Start an epoch of the reducer. With a starting value `init`, each output of the next `T.finalize_reducer`
    is op(init, contributions): combined once per output, not once per thread holding a partial, and taken as it
    is here (later writes to what it reads do not change it)."""
    trace = current_trace("T.reducer_init")
    buf = _reducer(trace, "T.reducer_init", reducer)
    from .allocate import alloc_var
    from .fill import fill

    dtype = str(buf.ty.dtype.dtype)
    if isinstance(init, tvm.ir.Expr) and str(init.ty.dtype) != dtype:
        raise trace.error(f"T.reducer_init: the starting value {init} has dtype {init.ty.dtype}, which does not "
                          f"match reducer `{buf.name}`'s dtype {dtype}; cast it (a Python number converts itself)")
    open_epoch(trace, buf)
    with internal_access(trace, buf):
        fill(buf, _identity(trace.reducers[buf], dtype))  # every thread's partial starts empty
    if init is None:
        trace.reducer_seeds.pop(buf, None)
    elif isinstance(init, int | float):
        trace.reducer_seeds[buf] = tirx.const(init, dtype)
    else:  # captured now, in a variable of each thread
        trace.reducer_seeds[buf] = alloc_var(dtype, init)[0]


def reducer_update(element: Any, contribution: Any) -> None:
    """`reducer[idx] = op(reducer[idx], contribution)` for one element of a reducer."""
    trace = current_trace("T.reducer_update")
    buf = _reducer(trace, "T.reducer_update", element)
    if not isinstance(element, tvm.ir.expr.TensorLoad):
        raise trace.error(f"T.reducer_update: the target is written `{buf.name}[indices]` (one element); got "
                          f"{element!r}")
    note_update(trace, buf)
    with internal_access(trace, buf):
        store(buf, tuple(element.indices), _combine(trace.reducers[buf], element, as_expr(contribution)))


