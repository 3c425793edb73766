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

from ..diagnostics import warn_once
from ..errors import SourceLoc
from ..ir.attrs import ASYNC_ATTR, LOOP_LAYOUT_ATTR, NO_SAFE_ACCESS, PER_THREAD_ATTR, SAFE_COPY
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


def _scope_level(scope: str) -> int:
    """How on-chip a scope is (upstream's rule for which side of a copy its loop walks): registers 2, shared 1,
    global 0."""
    return 2 if scope.startswith("local") else 1 if scope.startswith("shared") else 0


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
        """The non-unit dimensions of src and dst, paired in order (unit dimensions pair with nothing:
        `T.copy(A[b, 0:64, 0:32], tile)` into a (64, 32) tile). Equal extents, or one known only at run time (the
        copy covers the smaller: `T.copy(x[0:n], tile)` copies n elements), copy as they are. Constant extents that
        differ follow upstream's rule (below): a src region that fits inside dst copies whole
        (`T.copy(A[:, :2], B[:, :3])` writes two columns, with a one-time warning); anything else is an error."""
        dims = pair_dims(self.src, self.dst, run_time_extents=True)
        if dims is not None:
            return dims
        dims = pair_dims(self.src, self.dst, any_extents=True)
        if dims is None:
            raise self.error(
                f"T.copy: {self.src.describe()} and {self.dst.describe()} have different numbers of non-unit "
                "dimensions")
        # Upstream's rule: the copy walks the region in the more on-chip scope (src on a tie) and rejects walking a
        # dst smaller than src (part of src left out); walking past the other region would read or write outside it.
        # So a mismatch copies only when the walk is src's and src fits inside dst (an explicitly smaller source).
        loop_is_src = _scope_level(self.src.scope) >= _scope_level(self.dst.scope)
        for x, y in zip(*dims):
            ex, ey = self.src.extents[x], self.dst.extents[y]
            if not (isinstance(ex, tirx.IntImm) and isinstance(ey, tirx.IntImm)) or ex.value == ey.value:
                continue
            if not loop_is_src:
                why = (f"the copy walks the {self.dst.scope} dst region, so it would read outside the src region"
                       if ey.value > ex.value else
                       f"the copy walks the {self.dst.scope} dst region, so part of the src region would not be "
                       "copied")
            elif ex.value > ey.value:
                why = "the copy walks the src region, so it would write outside the dst region"
            else:
                continue
            raise self.error(
                f"T.copy: {self.src.describe()} and {self.dst.describe()} differ in extent ({ex} vs {ey}, src dim "
                f"{x}, dst dim {y}): {why}; slice both to the same shape")
        where = f"at {self.loc}: " if self.loc is not None else ""
        warn_once(f"copy-extents-{self.loc}-{self.src.describe()}-{self.dst.describe()}",
                  f"{where}T.copy: the extents of {self.src.describe()} and {self.dst.describe()} differ; it copies "
                  f"the src region and leaves the rest of the dst region as it was")
        return dims

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
        if args.options.disable_safe_copy_predication:
            stmt = tirx.AttrStmt(self.dst.buffer, NO_SAFE_ACCESS, tirx.const(1, "int32"), stmt)
        elif args.options.disable_safe_memory_access:
            stmt = tirx.AttrStmt(self.dst.buffer, SAFE_COPY, tirx.const(1, "int32"), stmt)
        return stmt
