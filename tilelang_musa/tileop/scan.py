"""`T.cumsum` / `T.cummax(src, dst=None, dim=0, reverse=False)`: inclusive scans of a shared tile, or of a box of
one (`A_shared[r0:r1, c0:c1]`, scanned from its first element with the tile's row pitch), along `dim`.

Lowered to the block-cooperative `tl::Scan1D` / `tl::Scan2D` templates (scan.h) with the op's combine functor;
every thread of the block calls them, between barriers (the template reads and writes shared memory through
pointers the barrier analysis cannot see).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import tvm
from tvm import tirx

from ..errors import SourceLoc
from .base import LowerArgs, TileOp, call_attr, call_loc
from .region import Region


@dataclass(frozen=True)
class Scan(TileOp):
    combine: ClassVar[str]
    src: Region
    dst: Region
    dim: int
    reverse: bool
    loc: SourceLoc | None = None

    @classmethod
    def from_call(cls, call: tvm.ir.Call) -> "Scan":
        return cls(Region.from_ir(call.args[0]), Region.from_ir(call.args[1]), int(call_attr(call, "dim")),
                   bool(call_attr(call, "reverse")), call_loc(call))

    def lower(self, args: LowerArgs) -> Any:
        if not args.whole_block:  # the scan templates number threads by threadIdx.x over the whole block
            raise self.error(f"{self.construct} on threads {args.first_thread}.."
                             f"{args.first_thread + args.num_threads - 1}: a scan runs on the whole block; move it "
                             "out of the T.ws region or thread guard")
        shape = [int(e) for e in self.src.static_extents()]
        reverse = str(self.reverse).lower()
        src = tirx.address_of(self.src.buffer[tuple(self.src.mins)])  # the box's first element
        dst = tirx.address_of(self.dst.buffer[tuple(self.dst.mins)])
        pitches = [int(r.buffer.ty.shape[-1]) for r in (self.src, self.dst)]  # row pitch of each 2-D tile
        if len(shape) == 1:
            call = tirx.call_extern("int32", f"tl::Scan1D<{args.num_threads}, {self.combine}, {reverse}>::run",
                                    src, dst, shape[0])
        elif pitches == [shape[1], shape[1]]:  # whole rows: the box is one contiguous run of each tile
            call = tirx.call_extern(
                "int32", f"tl::Scan2D<{args.num_threads}, {self.dim}, {self.combine}, {reverse}>::run",
                src, dst, shape[0], shape[1])
        else:  # part of each row: the tiles' own row pitches
            call = tirx.call_extern(
                "int32", f"tl::Scan2D<{args.num_threads}, {self.dim}, {self.combine}, {reverse}>::run_pitched",
                src, pitches[0], dst, pitches[1], shape[0], shape[1])
        sync = tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))
        return tirx.SeqStmt([sync, tirx.Evaluate(call), sync])


@dataclass(frozen=True)
class CumSum(Scan):
    op_name = "tl.tileop.cumsum"
    combine = "tl::SumOp"


@dataclass(frozen=True)
class CumMax(Scan):
    op_name = "tl.tileop.cummax"
    combine = "tl::MaxOp"
