"""`T.cumsum` / `T.cummax`: inclusive scans (prefix sums, running maxima) along one dimension of a shared tile
or a fragment.

A fragment is scanned through a shared tile (copied there, scanned by the block-cooperative template, copied
back): the scan runs across threads whatever the fragment's layout."""

from __future__ import annotations

from typing import Any

from ..tileop import emit_tile_op
from ..tileop.region import to_region
from ..tileop.scan import CumMax, CumSum, Scan
from .allocate import SHARED_SCOPE, FRAGMENT_SCOPE
from .builder import kernel_trace


def cumsum(src: Any, dst: Any = None, dim: int = 0, reverse: bool = False, annotations: dict | None = None) -> None:
    """dst = inclusive prefix sums of src along `dim` (in place when dst is None); `reverse` sums from the end.
    src and dst are 1-D or 2-D shared tiles, or boxes of them (`A_shared[r0:r1, :]`), or whole fragments, of the
    same shape. `annotations` ({str: value}) are
    carried on the scan's IR call for the user's own passes and tools, as upstream does; the scan ignores them."""
    _scan(CumSum, "T.cumsum", src, dst, dim, reverse, annotations)


def cummax(src: Any, dst: Any = None, dim: int = 0, reverse: bool = False, annotations: dict | None = None) -> None:
    """dst = running maxima of src along `dim` (in place when dst is None); `reverse` runs from the end. A NaN
    loses to any number (as in T.reduce_max). src and dst are as for T.cumsum."""
    _scan(CumMax, "T.cummax", src, dst, dim, reverse, annotations)


def _scan(op: type[Scan], name: str, src: Any, dst: Any, dim: int, reverse: bool,
          annotations: dict | None = None) -> None:
    trace = kernel_trace(name)
    annotations = dict(annotations or {})
    for key, value in annotations.items():
        if not isinstance(key, str) or key in ("dim", "reverse") or key.startswith("tl."):
            raise trace.error(f"{name}: annotation key {key!r} must be a string other than dim, reverse and tl.*")
        if not isinstance(value, (str, int, float, bool)):
            raise trace.error(f"{name}: annotation {key!r} must be a string, number or bool; got {value!r}")
    dst = dst if dst is not None else src
    src_r, _ = to_region(src, name, "src")
    dst_r, _ = to_region(dst, name, "dst")
    for what, r in (("src", src_r), ("dst", dst_r)):
        if r.scope not in ("shared", "shared.dyn", FRAGMENT_SCOPE):
            raise trace.error(f"{name}: {what} `{r.name}` must be a shared tile or a fragment; it is {r.scope}")
        whole = r.static_extents() == [int(e) for e in r.buffer.ty.shape]
        if r.ndim > 2 or None in r.static_extents() or (r.scope == FRAGMENT_SCOPE and not whole):
            raise trace.error(f"{name}: {what} must be a whole 1-D or 2-D fragment, or a constant-size box of a 1-D "
                              f"or 2-D shared tile; got {r.describe()}")
    if src_r.buffer.same_as(dst_r.buffer) and [str(m) for m in src_r.mins] != [str(m) for m in dst_r.mins]:
        raise trace.error(f"{name}: src and dst are different boxes of `{src_r.name}`: the scan would overwrite "
                          "elements it has still to read; scan in place or into another tile")
    if src_r.static_extents() != dst_r.static_extents() or src_r.dtype != dst_r.dtype:
        raise trace.error(f"{name}: src {src_r.describe()} and dst {dst_r.describe()} must match in shape and dtype")
    if not -src_r.ndim <= dim < src_r.ndim:
        raise trace.error(f"{name}: dim {dim} is out of range for the {src_r.ndim}-d `{src_r.name}`")
    if FRAGMENT_SCOPE in (src_r.scope, dst_r.scope):
        from .allocate import alloc_shared
        from .copy import copy

        scratch = alloc_shared(list(src_r.buffer.ty.shape), src_r.dtype, SHARED_SCOPE)
        copy(src, scratch)
        _scan(op, name, scratch, None, dim, reverse, annotations)
        copy(scratch, dst)
        return
    for what, r in (("src", src_r), ("dst", dst_r)):
        if r.buffer in trace.layout_annotations:
            raise trace.error(f"{name}: {what} `{r.name}` has an annotated layout; the scan needs a row-major tile")
    emit_tile_op(op.op_name, [src_r.to_ir(), dst_r.to_ir()],
                 {**annotations, "dim": dim % src_r.ndim, "reverse": bool(reverse)})
