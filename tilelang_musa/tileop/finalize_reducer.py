"""`T.finalize_reducer(r)`: combine the per-thread partials of a reducer (`T.alloc_reducer`) across the block.

A reducer is a fragment every thread holds whole (LayoutInference fixes that layout): the loops that update it
each add their own iterations' contributions to their thread's copy. Here every element is combined over all
the block's threads with the reducer's op (`tl::AllReduce`, reduce.h), so that each copy holds the total; the
epoch's seed, if any, is combined with each total once. With `batch=B`, B elements share one call
(`tl::BatchAllReduce`: one pair of barriers for the B).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..errors import SourceLoc
from ..ir.attrs import TEMPORARY_ANNOTATION
from ..ir.utils import unflatten
from .base import LowerArgs, TileOp, call_attr, call_loc
from .reduce import KINDS, _combine
from .region import Region



@dataclass(frozen=True)
class FinalizeReducer(TileOp):
    op_name = "tl.tileop.finalize_reducer"
    needs_layout = True
    reducer: Region
    kind: str
    seed: Any = None  # T.reducer_init's seed: combined once with each total
    batch: int = 1  # elements per combine call (tl::BatchAllReduce)
    loc: SourceLoc | None = None

    @classmethod
    def from_call(cls, call: tvm.ir.Call) -> "FinalizeReducer":
        seed = call.args[1] if len(call.args) > 1 else None
        return cls(Region.from_ir(call.args[0]), str(call_attr(call, "kind")), seed,
                   int(call_attr(call, "batch", 1)), call_loc(call))

    def lower(self, args: LowerArgs) -> Any:
        if not args.whole_block:  # the combine template spans and synchronizes the whole block
            raise self.error(f"T.finalize_reducer on threads {args.first_thread}.."
                             f"{args.first_thread + args.num_threads - 1}: a reducer is combined over the whole "
                             "block; finalize it outside the T.ws region or thread guard")
        threads = args.num_threads
        if threads & (threads - 1):
            raise self.error(f"T.finalize_reducer: the block's {threads} threads must be a power of two to combine "
                             "the reducer's partials")
        buf, dtype = self.reducer.buffer, self.reducer.dtype
        shape = [int(e) for e in buf.ty.shape]
        size = math.prod(shape)
        # upstream's wording of the two cases
        if self.batch > size:
            raise self.error(f"T.finalize_reducer: batch={self.batch} exceeds total output elements ({size}) of "
                             f"`{buf.name}`")
        if size % self.batch:
            raise self.error(f"T.finalize_reducer: batch={self.batch} must evenly divide total output elements "
                             f"({size}) of `{buf.name}`")
        warp = int(args.target.attrs["thread_warp_size"])
        stmts: list[Any] = []
        red_buf = None
        if threads > 32:  # AllReduce combines spans beyond 32 lanes through shared memory
            red_buf = Tb.buffer((threads * self.batch,), dtype, scope="shared.dyn")
            IRBuilder.name(f"{buf.name}_red_buf", red_buf)
            stmts.append(tirx.AllocBuffer(red_buf, {TEMPORARY_ANNOTATION: True}))
        slot = tirx.Var("slot", "int32")
        xs = unflatten(slot, shape)  # the slot's element (row-major, as the replicated layout stores it)
        scratch = tirx.address_of(red_buf[0]) if red_buf is not None else tirx.address_of(buf[tuple(xs)])
        functor = KINDS[self.kind][0]
        if self.batch == 1:
            combined = tirx.call_extern(dtype, f"tl::AllReduce<{functor}, {threads}, 1, {warp}>", buf[tuple(xs)],
                                        scratch)
            if self.seed is not None:
                combined = _combine(self.kind, combined, self.seed)
            stmts.append(tirx.For(slot, 0, size, tirx.ForKind.SERIAL, tirx.BufferStore(buf, combined, xs)))
        else:  # `batch` consecutive elements per call, sharing its barriers
            name = f"tl::BatchAllReduce<{functor}, {threads}, 1, {self.batch}, {warp}>::run_batch"
            run = tirx.Var("run", "int32")
            first = unflatten(run * self.batch, shape)
            scratch = tirx.address_of(red_buf[0]) if red_buf is not None else tirx.address_of(buf[tuple(first)])
            call = tirx.Evaluate(tirx.call_extern("void", name, tirx.address_of(buf[tuple(first)]), scratch))
            stmts.append(tirx.For(run, 0, size // self.batch, tirx.ForKind.SERIAL, call))
            if self.seed is not None:
                stmts.append(tirx.For(slot, 0, size, tirx.ForKind.SERIAL,
                                      tirx.BufferStore(buf, _combine(self.kind, buf[tuple(xs)], self.seed), xs)))
        return tirx.SeqStmt(stmts) if len(stmts) > 1 else stmts[0]
