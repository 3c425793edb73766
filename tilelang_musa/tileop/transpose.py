"""`T.transpose(src, dst)`: dst[..., j, i] = src[..., i, j] over the last two dimensions (cast to dst's dtype).

Lowered to a `T.Parallel` nest over src's extents, like T.copy: later passes map it onto the threads and
vectorize the side whose innermost index is contiguous.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm
from tvm import tirx

from ..errors import SourceLoc
from .base import LowerArgs, TileOp, call_loc
from .parallel import THREAD_PRIVATE_SCOPES, parallel_nest, thread_local_nest
from .region import Region


@dataclass(frozen=True)
class Transpose(TileOp):
    op_name = "tl.tileop.transpose"
    src: Region
    dst: Region
    loc: SourceLoc | None = None

    @classmethod
    def from_call(cls, call: tvm.ir.Call) -> "Transpose":
        return cls(Region.from_ir(call.args[0]), Region.from_ir(call.args[1]), call_loc(call))

    def check(self) -> None:
        """src is (..., M, N) and dst (..., N, M), both at least 2-D."""
        src, dst = [str(e) for e in self.src.extents], [str(e) for e in self.dst.extents]
        if len(src) < 2 or len(src) != len(dst) or src[:-2] + [src[-1], src[-2]] != dst:
            raise self.error(f"T.transpose: dst must be shaped like src with its last two dimensions swapped; got "
                             f"src {self.src.describe()} and dst {self.dst.describe()}")

    def lower(self, args: LowerArgs) -> Any:
        def body(idx):
            swapped = idx[:-2] + [idx[-1], idx[-2]]
            value = self.src.buffer[tuple(m + i for m, i in zip(self.src.mins, idx))]
            if self.src.dtype != self.dst.dtype:
                value = tirx.Cast(self.dst.dtype, value)
            return tirx.BufferStore(self.dst.buffer, value, [m + i for m, i in zip(self.dst.mins, swapped)])

        if self.src.scope in THREAD_PRIVATE_SCOPES or self.dst.scope in THREAD_PRIVATE_SCOPES:
            return thread_local_nest(self.src.extents, body)
        return parallel_nest(self.src.extents, body, self.loc)
