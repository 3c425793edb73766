"""Reductions along one dimension: `T.reduce_sum / max / min / abssum / absmax`, and of integers
`T.reduce_bitand / bitor / bitxor`.

The reduction itself runs on fragments (tileop/reduce.py). A shared or thread-local src or dst, or a view of a
fragment, is staged through a fragment of its shape with `T.copy` (dst is read first when `clear=False`); a
shared dst's staging is fenced with barriers (see `_reduce`).
"""

from __future__ import annotations

import math
from typing import Any

import tvm

from ..tileop import emit_tile_op
from ..tileop.reduce import BITWISE_KINDS, KINDS, NAN_FUNCTORS, Reduce
from ..tileop.region import Region, to_region
from .allocate import FRAGMENT_SCOPE, alloc_fragment
from .builder import as_expr, current_trace, kernel_trace, static_value
from .builtin import sync_threads
from .copy import copy

_STAGED_SCOPES = ("shared", "shared.dyn", "local", "local.var", FRAGMENT_SCOPE)


def _is_fragment(trace, region: Region) -> bool:
    """A fragment of its own (a T.reshape / T.view of a fragment has no layout of its own: it is staged)."""
    return region.scope == FRAGMENT_SCOPE and region.buffer not in trace.buffer_views


def _fragment_of(trace, construct: str, what: str, region: Region) -> Region:
    """A fragment shaped like `region` (shared, thread-local, or a view of a fragment), to stage it through."""
    if region.scope not in _STAGED_SCOPES:
        raise trace.error(f"{construct}: {what} `{region.name}` must be a fragment, shared memory or a local buffer; "
                          f"it is {region.scope}")
    extents = region.static_extents()
    if any(e is None for e in extents):
        raise trace.error(f"{construct}: {what} {region.describe()} must have constant extents")
    trace.naming_hint = f"{region.name}_frag"
    staged, _ = to_region(alloc_fragment(tuple(extents), region.dtype), construct, what)
    return staged


ANNOTATION_KEYS = ("batch", "nan_propagate")  # upstream's keys for a reduction, the same as its keywords


def _reduce(kind: str, src: Any, dst: Any, dim: int, clear: bool, batch: int = 1,
            nan_propagate: bool = False, annotations: dict | None = None) -> None:
    construct = f"T.reduce_{kind}"
    trace = kernel_trace(construct)
    for key, val in (annotations or {}).items():  # upstream spells batch= and nan_propagate= this way too
        if key not in ANNOTATION_KEYS:
            raise trace.error(f"{construct}: annotation {key!r} has no effect here; the ones a reduction takes are "
                              f"{', '.join(ANNOTATION_KEYS)}")
        if key == "batch":
            batch = int(val)
        else:
            nan_propagate = bool(val)
    if not isinstance(batch, int) or batch < 1:
        raise trace.error(f"{construct}: batch must be >= 1, got {batch!r}")
    clear = _static_clear(trace, construct, clear)
    if nan_propagate and kind not in NAN_FUNCTORS:
        raise trace.error(f"{construct}: nan_propagate applies to max, min and absmax only")
    src_r, _ = to_region(src, construct, "src")
    dst_r, _ = to_region(dst, construct, "dst")
    if kind in BITWISE_KINDS and not all(r.dtype.startswith(("int", "uint")) for r in (src_r, dst_r)):
        raise trace.error(f"{construct}: src and dst must be integers; got {src_r.dtype} and {dst_r.dtype}")
    ndim = src_r.ndim
    if not -ndim <= dim < ndim:
        raise trace.error(f"{construct}: dim {dim} is out of range for the {ndim}-d `{src_r.name}`")
    dim %= ndim
    expected = [e for d, e in enumerate(src_r.static_extents()) if d != dim] or [1]
    if dst_r.static_extents() != expected:
        raise trace.error(f"{construct}: dst {dst_r.describe()} must have the shape of {src_r.describe()} without "
                          f"dim {dim}: {tuple(expected)}")
    total = math.prod(expected)
    if batch > total or total % batch:
        raise trace.error(f"{construct}: batch={batch} must evenly divide the {total} results of `{dst_r.name}` "
                          + ("(it exceeds total output elements)" if batch > total else ""))
    src_staged = src_r if _is_fragment(trace, src_r) else _fragment_of(trace, construct, "src", src_r)
    dst_staged = dst_r if _is_fragment(trace, dst_r) else _fragment_of(trace, construct, "dst", dst_r)
    if src_staged is not src_r:
        copy(src_r.to_ir(), src_staged.to_ir())
    # A shared dst is read and written back by every thread holding a replica of a result, at the same address:
    # TVM's ThreadSync takes equal indices for a thread's own element and puts no barrier between them (nor
    # between this write-back and the read of the next call in a loop), so the staging brings its own.
    shared_dst = dst_staged is not dst_r and dst_r.scope in ("shared", "shared.dyn")
    if dst_staged is not dst_r and not clear:
        copy(dst_r.to_ir(), dst_staged.to_ir())
        if shared_dst:
            sync_threads()  # every replica has read dst before any writes it back
    emit_tile_op(Reduce.op_name, [src_staged.to_ir(), dst_staged.to_ir()],
                 {"kind": kind, "dim": dim, "clear": bool(clear), "batch": batch, "nan_propagate": bool(nan_propagate)})
    if dst_staged is not dst_r:
        copy(dst_staged.to_ir(), dst_r.to_ir())
        if shared_dst:
            sync_threads()  # the write-back is complete before dst is read again


def _static_clear(trace: Any, construct: str, clear: Any) -> bool:
    """`clear` as a Python bool. Python's `bool()` of a run-time IR condition (`clear=(k == 0)`) is False whatever
    the condition, so such a value would silently accumulate: it is an error at the call instead."""
    value = static_value(clear)
    if value is None and isinstance(as_expr(clear), tvm.ir.Expr):
        raise trace.error(f"{construct}: clear must be known when the kernel is traced (a Python bool); got the "
                          f"run-time condition `{clear}` (reduce with clear=False, after T.fill of the identity under "
                          "that condition, for a per-step choice)")
    return bool(clear if value is None else value)


def reduce_sum(src: Any, dst: Any, dim: int = -1, clear: bool = True, batch: int = 1,
               annotations: dict | None = None) -> None:
    """dst = sum of src along `dim` (clear=False: dst += that sum). src and dst are fragments, shared memory or
    local buffers. `batch` results share each cross-thread exchange (it must divide the number of results)."""
    _reduce("sum", src, dst, dim, clear, batch, False, annotations)


def reduce_max(src: Any, dst: Any, dim: int = -1, clear: bool = True, batch: int = 1,
               nan_propagate: bool = False, annotations: dict | None = None) -> None:
    """dst = max of src along `dim` (clear=False: dst = max(dst, that max)). A NaN is skipped, or with
    `nan_propagate=True` is the result of its row."""
    _reduce("max", src, dst, dim, clear, batch, nan_propagate, annotations)


def reduce_min(src: Any, dst: Any, dim: int = -1, clear: bool = True, batch: int = 1,
               nan_propagate: bool = False, annotations: dict | None = None) -> None:
    """dst = min of src along `dim` (clear=False: dst = min(dst, that min))."""
    _reduce("min", src, dst, dim, clear, batch, nan_propagate, annotations)


def reduce_abssum(src: Any, dst: Any, dim: int = -1, clear: bool = True, batch: int = 1,
               annotations: dict | None = None) -> None:
    """dst = sum of |src| along `dim`."""
    _reduce("abssum", src, dst, dim, clear, batch, False, annotations)


def reduce_absmax(src: Any, dst: Any, dim: int = -1, clear: bool = True, batch: int = 1,
                  nan_propagate: bool = False, annotations: dict | None = None) -> None:
    """dst = max of |src| along `dim`."""
    _reduce("absmax", src, dst, dim, clear, batch, nan_propagate, annotations)


def reduce_bitand(src: Any, dst: Any, dim: int = -1, clear: bool = True, batch: int = 1,
               annotations: dict | None = None) -> None:
    """dst = bitwise and of the integers of src along `dim` (clear=False: dst &= that)."""
    _reduce("bitand", src, dst, dim, clear, batch, False, annotations)


def reduce_bitor(src: Any, dst: Any, dim: int = -1, clear: bool = True, batch: int = 1,
               annotations: dict | None = None) -> None:
    """dst = bitwise or of the integers of src along `dim` (clear=False: dst |= that)."""
    _reduce("bitor", src, dst, dim, clear, batch, False, annotations)


def reduce_bitxor(src: Any, dst: Any, dim: int = -1, clear: bool = True, batch: int = 1,
               annotations: dict | None = None) -> None:
    """dst = bitwise xor of the integers of src along `dim` (clear=False: dst ^= that)."""
    _reduce("bitxor", src, dst, dim, clear, batch, False, annotations)


def reduce(src: Any, dst: Any, reduce_type: str, dim: int = -1, clear: bool = True, batch: int = 1,
           nan_propagate: bool = False, annotations: dict | None = None) -> None:
    """`T.reduce(src, dst, "sum" | "max" | "min" | "abssum" | "absmax", dim, clear)`."""
    if reduce_type not in KINDS:
        raise current_trace("T.reduce").error(f"T.reduce: unknown reduce_type {reduce_type!r}; one of {sorted(KINDS)}")
    _reduce(reduce_type, src, dst, dim, clear, batch, nan_propagate, annotations)
