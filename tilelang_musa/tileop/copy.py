"""`T.copy(src, dst)`: dst[region] = cast(src[region]) between any of global / shared / fragment / local.

Lowered to a `T.Parallel` nest over the copy's extents (later passes map it onto the threads, vectorize it
and guard it): a source element outside its tensor reads as zero and a destination element outside its
tensor is not written (safe-copy predication, off with TL_DISABLE_SAFE_COPY_PREDICATION).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm
from tvm import tirx

from ..errors import SourceLoc
from ..transform.pass_config import PassConfigKey, enabled
from .base import LowerArgs, TileOp, call_attr, call_loc
from .parallel import parallel_nest
from .region import Region

# Wraps a lowered copy whose accesses must not be guarded (TL_DISABLE_SAFE_COPY_PREDICATION).
NO_SAFE_ACCESS = "tl.no_safe_access"


def _is_one(extent: Any) -> bool:
    return isinstance(extent, tirx.IntImm) and int(extent.value) == 1 or extent == 1


def _same_extent(a: Any, b: Any) -> bool:
    ana = tvm.sym.Analyzer()
    return ana.can_prove_equal(a, b)


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
    if not all(_is_one(e) for e in extra):
        raise error(f"T.copy: {other.describe()} has more non-unit dimensions than {origin.name} has dimensions")
    return extents[len(extents) - ndim:]


@dataclass(frozen=True)
class Copy(TileOp):
    op_name = "tl.tileop.copy"
    src: Region
    dst: Region
    loc: SourceLoc | None = None

    @classmethod
    def from_call(cls, call: tvm.ir.Call) -> "Copy":
        return cls(Region.from_ir(call.args[0]), Region.from_ir(call.args[1]), call_loc(call))

    def copy_dims(self) -> tuple[list[int], list[int]]:
        """The non-unit dimensions of src and dst, paired in order (their extents are equal)."""
        src_dims = [d for d, e in enumerate(self.src.extents) if not _is_one(e)]
        dst_dims = [d for d, e in enumerate(self.dst.extents) if not _is_one(e)]
        if len(src_dims) != len(dst_dims) or not all(
                _same_extent(self.src.extents[s], self.dst.extents[d]) for s, d in zip(src_dims, dst_dims)):
            raise self.error(
                f"T.copy: the extents of {self.src.describe()} and {self.dst.describe()} differ "
                "(after dropping size-1 dimensions)")
        return src_dims, dst_dims

    def lower(self, args: LowerArgs) -> Any:
        src_dims, dst_dims = self.copy_dims()
        extents = [self.src.extents[d] for d in src_dims] or [tirx.const(1, "int32")]

        def body(idx):
            src_index = list(self.src.mins)
            dst_index = list(self.dst.mins)
            for k, (s, d) in enumerate(zip(src_dims, dst_dims)):
                src_index[s] = src_index[s] + idx[k]
                dst_index[d] = dst_index[d] + idx[k]
            value = self.src.buffer[tuple(src_index)]
            if self.src.dtype != self.dst.dtype:
                value = tirx.Cast(self.dst.dtype, value)
            return tirx.BufferStore(self.dst.buffer, value, dst_index)

        stmt = parallel_nest(extents, body, self.loc)
        if enabled(args.configs, PassConfigKey.TL_DISABLE_SAFE_COPY_PREDICATION):
            stmt = tirx.AttrStmt(self.dst.buffer, NO_SAFE_ACCESS, tirx.const(1, "int32"), stmt)
        return stmt
