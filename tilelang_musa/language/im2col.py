"""`T.im2col`: a tile of the im2col matrix of an NHWC image (tileop/im2col.py says which elements)."""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from ..diagnostics import warn_once
from ..tileop import Im2Col, emit_tile_op
from ..tileop.region import to_region
from .builder import kernel_trace


def im2col(img: Any, col: Any, nhw_step: Any, c_step: Any, kernel: int, stride: int, dilation: int, pad: int,
           eviction_policy: str | None = None, annotations: dict | None = None) -> None:
    """Fill `col` (block_M, block_K) with rows nhw_step * block_M ... and columns c_step * block_K ... of the
    im2col matrix of `img` (N, H, W, C) for a `kernel` x `kernel` convolution with `stride`, `dilation`, `pad`.
    `eviction_policy` is upstream's L2 hint for the loads: the elements are gathered by plain loads here, which
    carry no hint, so a policy other than evict_normal warns once and has no effect; so do `annotations`."""
    trace = kernel_trace("T.im2col")
    if eviction_policy not in (None, "evict_normal", "evict_first", "evict_last"):
        raise ValueError(f"T.im2col: eviction_policy must be 'evict_normal', 'evict_first' or 'evict_last'; got "
                         f"{eviction_policy!r}")
    if eviction_policy not in (None, "evict_normal") or annotations:
        warn_once("T.im2col hints", "T.im2col: eviction_policy and annotations have no effect on MUSA (the image "
                  "is gathered by plain loads, which carry no cache hint)")
    img_region, _ = to_region(img, "T.im2col", "img")
    col_region, _ = to_region(col, "T.im2col", "col")
    steps = [s if isinstance(s, tvm.ir.Expr) else tirx.const(int(s), "int32") for s in (nhw_step, c_step)]
    ints = [int(x) for x in (kernel, stride, dilation, pad)]
    Im2Col(img_region, col_region, *steps, *ints, trace.loc).check()  # at the user's line
    emit_tile_op(Im2Col.op_name, [img_region.to_ir(), col_region.to_ir(), *steps,
                                  *[tirx.const(x, "int32") for x in ints]], {})


c2d_im2col = im2col  # upstream's older name
