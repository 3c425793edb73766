"""`T.transpose(src, dst)`: dst[..., j, i] = src[..., i, j] over the last two dimensions of two tiles."""

from __future__ import annotations

from typing import Any

from ..tileop import Transpose, emit_tile_op
from ..tileop.region import to_region
from .builder import kernel_trace


def transpose(src: Any, dst: Any) -> None:
    """Write the transpose of `src` (a buffer or region of shape (..., M, N)) into `dst` (shape (..., N, M)),
    cast to dst's dtype. Usually shared to shared: `T.transpose(tile, tile_T)`; any scopes work."""
    trace = kernel_trace("T.transpose")
    src_region, _ = to_region(src, "T.transpose", "src")
    dst_region, _ = to_region(dst, "T.transpose", "dst")
    Transpose(src_region, dst_region, trace.loc).check()  # at the user's line
    emit_tile_op(Transpose.op_name, [src_region.to_ir(), dst_region.to_ir()], {})
