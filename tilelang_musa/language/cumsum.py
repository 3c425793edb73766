"""`T.cumsum`: inclusive prefix sum along one dimension of a shared tile or a fragment.

A fragment is summed through a shared tile (copied there, summed by the block-cooperative template, copied
back): the prefix runs across threads whatever the fragment's layout."""

from __future__ import annotations

from typing import Any

from ..tileop import emit_tile_op
from ..tileop.cumsum import CumSum
from ..tileop.region import to_region
from .allocate import SHARED_SCOPE, FRAGMENT_SCOPE
from .builder import current_trace


def cumsum(src: Any, dst: Any = None, dim: int = 0, reverse: bool = False) -> None:
    """dst = inclusive prefix sum of src along `dim` (in place when dst is None); `reverse` sums from the end.
    src and dst are whole 1-D or 2-D shared tiles of the same shape."""
    trace = current_trace("T.cumsum")
    if trace.kernel is None:
        raise trace.error("`T.cumsum` must be used inside `with T.Kernel(...)`")
    src_r, _ = to_region(src, "T.cumsum", "src")
    dst_r, _ = to_region(dst if dst is not None else src, "T.cumsum", "dst")
    if FRAGMENT_SCOPE in (src_r.scope, dst_r.scope):
        _cumsum_through_shared(trace, src, dst if dst is not None else src, src_r, dst_r, dim, reverse)
        return
    for what, r in (("src", src_r), ("dst", dst_r)):
        if r.scope not in ("shared", "shared.dyn"):
            raise trace.error(f"T.cumsum: {what} `{r.name}` must be a shared tile or a fragment; it is {r.scope}")
        if r.static_extents() != [int(e) for e in r.buffer.ty.shape] or r.ndim > 2:
            raise trace.error(f"T.cumsum: {what} must be a whole 1-D or 2-D shared tile; got {r.describe()}")
        if r.buffer in trace.layout_annotations:
            raise trace.error(f"T.cumsum: {what} `{r.name}` has an annotated layout; cumsum needs a row-major tile")
    if src_r.static_extents() != dst_r.static_extents() or src_r.dtype != dst_r.dtype:
        raise trace.error(f"T.cumsum: src {src_r.describe()} and dst {dst_r.describe()} must match in shape and dtype")
    if not -src_r.ndim <= dim < src_r.ndim:
        raise trace.error(f"T.cumsum: dim {dim} is out of range for the {src_r.ndim}-d `{src_r.name}`")
    emit_tile_op(CumSum.op_name, [src_r.to_ir(), dst_r.to_ir()], {"dim": dim % src_r.ndim, "reverse": bool(reverse)})


def _cumsum_through_shared(trace, src: Any, dst: Any, src_r, dst_r, dim: int, reverse: bool) -> None:
    from .allocate import alloc_shared
    from .copy import copy

    for what, r in (("src", src_r), ("dst", dst_r)):
        if r.static_extents() != [int(e) for e in r.buffer.ty.shape] or r.ndim > 2:
            raise trace.error(f"T.cumsum: {what} must be a whole 1-D or 2-D tile; got {r.describe()}")
    scratch = alloc_shared(list(src_r.buffer.ty.shape), src_r.dtype, SHARED_SCOPE)
    copy(src, scratch)
    cumsum(scratch, None, dim, reverse)
    copy(scratch, dst)
