"""`T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)`: one (M, K) tile of the im2col matrix of an
NHWC image, for a convolution as a GEMM (upstream TileLang's `tl.tileop.im2col`).

Row m = nhw_step * M + i of the matrix is the output pixel (n, oh, ow) (m = (n * OH + oh) * OW + ow); column
k = c_step * K + j is the kernel tap and channel (kh, kw, c) (k = (kh * kernel + kw) * C + c). The element is
img[n, oh * stride + kh * dilation - pad, ow * stride + kw * dilation - pad, c], zero in the padding and outside
the matrix (rows past N * OH * OW, columns past kernel * kernel * C). Lowered to a `T.Parallel` nest over the
tile, like T.copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm
from tvm import tirx

from ..errors import SourceLoc
from ..ir.utils import as_int
from .base import LowerArgs, TileOp, call_loc
from .parallel import THREAD_PRIVATE_SCOPES, parallel_nest, thread_local_nest
from .region import Region


@dataclass(frozen=True)
class Im2Col(TileOp):
    op_name = "tl.tileop.im2col"
    img: Region
    col: Region
    nhw_step: Any
    c_step: Any
    kernel: int
    stride: int
    dilation: int
    pad: int
    loc: SourceLoc | None = None

    @classmethod
    def from_call(cls, call: tvm.ir.Call) -> "Im2Col":
        ints = [as_int(a) for a in call.args[4:8]]
        return cls(Region.from_ir(call.args[0]), Region.from_ir(call.args[1]), call.args[2], call.args[3], *ints,
                   call_loc(call))

    def check(self) -> None:
        if len(self.img.buffer.ty.shape) != 4:
            raise self.error(f"T.im2col: the image must be a 4-D NHWC tensor; got {self.img.describe()}")
        if len(self.col.extents) < 2:
            raise self.error(f"T.im2col: the column tile must have at least 2 dimensions; got {self.col.describe()}")
        for name in ("kernel", "stride", "dilation", "pad"):
            value = getattr(self, name)
            if value is None or value < (0 if name == "pad" else 1):
                raise self.error(f"T.im2col: `{name}` must be a Python int {'>= 0' if name == 'pad' else '>= 1'}; "
                                 f"got {value}")

    def lower(self, args: LowerArgs) -> Any:
        batch, h, w, c = self.img.buffer.ty.shape
        span = (self.kernel - 1) * self.dilation + 1
        out_h = tirx.floordiv(h + 2 * self.pad - span, self.stride) + 1
        out_w = tirx.floordiv(w + 2 * self.pad - span, self.stride) + 1
        block_m, block_k = self.col.extents[-2], self.col.extents[-1]
        lead = len(self.col.extents) - 2

        def body(idx):
            i, j = idx[-2], idx[-1]
            m = self.nhw_step * block_m + i
            k = self.c_step * block_k + j
            n = tirx.floordiv(m, out_h * out_w)
            ih = tirx.floordiv(tirx.floormod(m, out_h * out_w), out_w) * self.stride \
                + tirx.floordiv(k, self.kernel * c) * self.dilation - self.pad
            iw = tirx.floormod(m, out_w) * self.stride \
                + tirx.floormod(tirx.floordiv(k, c), self.kernel) * self.dilation - self.pad
            inside = tirx.And(tirx.And(tirx.And(ih >= 0, ih < h), tirx.And(iw >= 0, iw < w)),
                              tirx.And(n < batch, k < self.kernel * self.kernel * c))
            value = self.img.buffer[n, ih, iw, tirx.floormod(k, c)]
            if self.img.dtype != self.col.dtype:
                value = tirx.Cast(self.col.dtype, value)
            value = tirx.if_then_else(inside, value, tirx.const(0, self.col.dtype))
            return tirx.BufferStore(self.col.buffer, value, [mn + x for mn, x in zip(self.col.mins, idx)])

        extents = [tirx.const(1, "int32")] * lead + [block_m, block_k]
        if self.col.scope in THREAD_PRIVATE_SCOPES:
            return thread_local_nest(extents, body)
        return parallel_nest(extents, body, self.loc)
