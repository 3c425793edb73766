"""`T.fill(dst, value)` / `T.clear(dst)`: dst[region] = value. Writes dst; reads nothing."""

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
class Fill(TileOp):
    op_name = "tl.tileop.fill"
    dst: Region
    value: Any
    loc: SourceLoc | None = None

    @classmethod
    def from_call(cls, call: tvm.ir.Call) -> "Fill":
        return cls(Region.from_ir(call.args[0]), call.args[1], call_loc(call))

    @property
    def thread_private(self) -> bool:
        return self.dst.scope in THREAD_PRIVATE_SCOPES

    def lower(self, args: LowerArgs) -> Any:
        value = self.value
        if value.ty.dtype != self.dst.buffer.ty.dtype.dtype:
            value = tirx.Cast(self.dst.dtype, value)

        def body(idx):
            return tirx.BufferStore(self.dst.buffer, value, [m + i for m, i in zip(self.dst.mins, idx)])

        if self.thread_private:  # every thread fills its own copy
            return thread_local_nest(self.dst.extents, body)
        return parallel_nest(self.dst.extents, body, self.loc)
