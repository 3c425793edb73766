"""`T.cumsum`: inclusive prefix sum along one dimension of a shared tile."""

from __future__ import annotations

from typing import Any

from ..tileop import emit_tile_op
from ..tileop.cumsum import CumSum
from ..tileop.region import to_region
from .builder import current_trace


def cumsum(src: Any, dst: Any = None, dim: int = 0, reverse: bool = False) -> None:
    """dst = inclusive prefix sum of src along `dim` (in place when dst is None); `reverse` sums from the end.
    src and dst are whole 1-D or 2-D shared tiles of the same shape."""
    trace = current_trace("T.cumsum")
    if trace.kernel is None:
        raise trace.error("`T.cumsum` must be used inside `with T.Kernel(...)`")
    src_r, _ = to_region(src, "T.cumsum", "src")
    dst_r, _ = to_region(dst if dst is not None else src, "T.cumsum", "dst")
    for what, r in (("src", src_r), ("dst", dst_r)):
        if r.scope not in ("shared", "shared.dyn"):
            raise trace.error(f"T.cumsum: {what} `{r.name}` must be a shared tile (copy a fragment to shared memory "
                              f"first); it is {r.scope}")
        if r.static_extents() != [int(e) for e in r.buffer.ty.shape] or r.ndim > 2:
            raise trace.error(f"T.cumsum: {what} must be a whole 1-D or 2-D shared tile; got {r.describe()}")
        if r.buffer in trace.layout_annotations:
            raise trace.error(f"T.cumsum: {what} `{r.name}` has an annotated layout; cumsum needs a row-major tile")
    if src_r.static_extents() != dst_r.static_extents() or src_r.dtype != dst_r.dtype:
        raise trace.error(f"T.cumsum: src {src_r.describe()} and dst {dst_r.describe()} must match in shape and dtype")
    if not -src_r.ndim <= dim < src_r.ndim:
        raise trace.error(f"T.cumsum: dim {dim} is out of range for the {src_r.ndim}-d `{src_r.name}`")
    emit_tile_op(CumSum.op_name, [src_r.to_ir(), dst_r.to_ir()], {"dim": dim % src_r.ndim, "reverse": bool(reverse)})
