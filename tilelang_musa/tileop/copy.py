"""`T.copy(src, dst)`: dst[region] = cast(src[region]) between any of global / shared / fragment / local.

Lowered to a `T.Parallel` nest over the copy's extents (later passes map it onto the threads, vectorize it
and guard it): a source element outside its tensor reads as zero and a destination element outside its
tensor is not written (safe-copy predication, off with TL_DISABLE_SAFE_COPY_PREDICATION).
Asynchronous (LDLMS) and robust-descriptor copies are cut into pieces instead (async_copy.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import tvm
from tvm import tirx

from ..errors import SourceLoc
from ..ir.attrs import ASYNC_ATTR, LOOP_LAYOUT_ATTR, NO_SAFE_ACCESS, PER_THREAD_ATTR, SAFE_COPY
from ..ir.pass_config import PassConfigKey, enabled
from .async_copy import lower_piecewise_copy
from .base import LowerArgs, TileOp, call_attr, call_loc
from .parallel import THREAD_PRIVATE_SCOPES, parallel_nest, thread_local_nest
from .region import Region, common_extents, is_unit, pair_dims, paired_indices

# A robust descriptor is a piecewise copy's third argument (async_copy.py); its call attributes are in ir/attrs.py.


def resolve_extents(src: Region, src_origin: bool, dst: Region, dst_origin: bool, error) -> tuple[Region, Region]:
    """Give an origin operand the extents of the other operand, matching trailing dimensions."""
    if src_origin and dst_origin:
        raise error("T.copy: both operands are single elements; make at least one a buffer or a slice")
    if src_origin:
        src = Region(src.buffer, src.mins, _fit(dst.extents, src.ndim, src, dst, error))
    if dst_origin:
        dst = Region(dst.buffer, dst.mins, _fit(src.extents, dst.ndim, dst, src, error))
    return src, dst


def _fit(extents: tuple, ndim: int, origin: Region, other: Region, error) -> tuple:
    extents = tuple(extents)
    if len(extents) <= ndim:
        return (tirx.const(1, "int32"),) * (ndim - len(extents)) + extents
    extra = extents[: len(extents) - ndim]
    if not all(is_unit(e) for e in extra):
        raise error(f"T.copy: {other.describe()} has more non-unit dimensions than {origin.name} has dimensions")
    return extents[len(extents) - ndim:]


@dataclass(frozen=True)
class Copy(TileOp):
    op_name = "tl.tileop.copy"
    src: Region
    dst: Region
    loc: SourceLoc | None = None
    coalesced_width: int | None = None  # elements per access at most (the vectorizer's cap)
    async_mode: str | None = None  # LDLMS: "wait" (force_async_copy=True) or "commit" (T.async_copy)
    robust_desc: Any = None  # the T.make_robust_desc variable guarding src (src_robust_desc=)
    per_thread: bool = False  # one element per thread that runs it (`T.copy(A[i], s[j], force_async_copy=True)`)
    loop_layout: Any = None  # T.copy(..., loop_layout=F): the loop runs by F (as T.Parallel(..., loop_layout=F))

    @classmethod
    def from_call(cls, call: tvm.ir.Call) -> "Copy":
        width = call_attr(call, "coalesced_width")
        mode = call_attr(call, ASYNC_ATTR)
        return cls(Region.from_ir(call.args[0]), Region.from_ir(call.args[1]), call_loc(call),
                   None if width is None else int(width), None if mode is None else str(mode),
                   call.args[2] if len(call.args) > 2 else None, bool(call_attr(call, PER_THREAD_ATTR, False)),
                   call_attr(call, LOOP_LAYOUT_ATTR))

    def copy_dims(self) -> tuple[list[int], list[int]]:
        """The non-unit dimensions of src and dst, paired in order. Their extents must be equal, or one known only
        at run time: then the copy covers the smaller, e.g. `T.copy(x[0:n], tile)` copies n elements. Unit
        dimensions pair with nothing (`T.copy(A[b, 0:64, 0:32], tile)` into a (64, 32) tile)."""
        dims = pair_dims(self.src, self.dst, run_time_extents=True)
        if dims is not None:
            return dims
        paired = pair_dims(self.src, self.dst, any_extents=True)
        if paired is None:
            raise self.error(
                f"T.copy: {self.src.describe()} and {self.dst.describe()} have different numbers of non-unit "
                "dimensions")
        # Constant extents that differ (`T.copy(A[:, :2], B[:, :3])`): copying either extent would read or write
        # outside one of the regions, or leave part of dst unwritten; the user must say which.
        x, y = next((x, y) for x, y in zip(*paired)
                    if isinstance(self.src.extents[x], tirx.IntImm) and isinstance(self.dst.extents[y], tirx.IntImm)
                    and self.src.extents[x].value != self.dst.extents[y].value)
        raise self.error(
            f"T.copy: {self.src.describe()} and {self.dst.describe()} differ in extent ({self.src.extents[x]} vs "
            f"{self.dst.extents[y]}, src dim {x}, dst dim {y}): the copy would read or write outside one of the "
            "regions; slice both to the same shape")

    @property
    def thread_private(self) -> bool:
        """A copy to or from a thread's own buffer: every thread copies all of it."""
        return self.src.scope in THREAD_PRIVATE_SCOPES or self.dst.scope in THREAD_PRIVATE_SCOPES

    def lower(self, args: LowerArgs) -> Any:
        if self.async_mode is not None or self.robust_desc is not None:
            return lower_piecewise_copy(self, args)
        dims = self.copy_dims()
        extents = common_extents(self.src, self.dst, dims) or [tirx.const(1, "int32")]
        # A fragment's loops need constant extents: where the other side's extent is known only at run time
        # (`T.copy(x[0:n], frag)`), loop over the fragment's and guard each element by the run-time one.
        bounds = [None] * len(extents)
        if self.src.scope == "local.fragment" or self.dst.scope == "local.fragment":
            for k, (x, y) in enumerate(zip(*dims)):
                if isinstance(extents[k], tirx.IntImm):
                    continue
                fixed = [e for e in (self.src.extents[x], self.dst.extents[y]) if isinstance(e, tirx.IntImm)]
                if fixed:
                    bounds[k], extents[k] = extents[k], fixed[0]

        def body(idx):
            src_index, dst_index = paired_indices(self.src, self.dst, dims, idx)
            value = self.src.buffer[tuple(src_index)]
            if self.src.dtype != self.dst.dtype:
                value = tirx.Cast(self.dst.dtype, value)
            stmt = tirx.BufferStore(self.dst.buffer, value, dst_index)
            guards = [i < bound for i, bound in zip(idx, bounds) if bound is not None]
            if guards:
                stmt = tirx.IfThenElse(functools.reduce(tirx.And, guards), stmt, None)
            return stmt

        stmt = (thread_local_nest(extents, body) if self.thread_private
                else parallel_nest(extents, body, self.loc, coalesced_width=self.coalesced_width,
                                 loop_layout=self.loop_layout))
        if enabled(args.configs, PassConfigKey.TL_DISABLE_SAFE_COPY_PREDICATION):
            stmt = tirx.AttrStmt(self.dst.buffer, NO_SAFE_ACCESS, tirx.const(1, "int32"), stmt)
        elif enabled(args.configs, PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS):
            stmt = tirx.AttrStmt(self.dst.buffer, SAFE_COPY, tirx.const(1, "int32"), stmt)
        return stmt
