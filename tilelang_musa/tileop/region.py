"""Buffer regions as tile ops see them: a buffer plus one (min, extent) per dimension.

The language accepts a whole buffer (`A_shared`), a slice (`A[0:64, k*32:(k+1)*32]`) or an element used as
an origin (`A[by * 64, k * 32]`, whose extents come from the other operand of the op); in the IR every
operand is a `TensorRegion`, and an origin is a region whose extents are all 1 marked by the op's
`origin_of` attribute.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm
from tvm import tirx

TensorRegion = tvm.ir.expr.TensorRegion
TensorLoad = tvm.ir.expr.TensorLoad


@dataclass(frozen=True)
class Region:
    buffer: Any  # a buffer Var
    mins: tuple
    extents: tuple

    @property
    def ndim(self) -> int:
        return len(self.extents)

    @property
    def scope(self) -> str:
        return str(self.buffer.ty.storage_scope)

    @property
    def dtype(self) -> str:
        return str(self.buffer.ty.dtype.dtype)

    @property
    def name(self) -> str:
        return self.buffer.name

    def static_extents(self) -> list[int | None]:
        return [int(e.value) if isinstance(e, tirx.IntImm) else e if isinstance(e, int) else None
                for e in self.extents]

    def to_ir(self) -> TensorRegion:
        return tirx.BufferRegion(self.buffer, [tvm.ir.Range.from_min_extent(m, e) for m, e in zip(self.mins, self.extents)])

    @staticmethod
    def from_ir(region: TensorRegion) -> "Region":
        return Region(region.source, tuple(r.min for r in region.region), tuple(r.extent for r in region.region))

    def describe(self) -> str:
        dims = ", ".join(str(e) for e in self.extents)
        return f"{self.name} ({dims})"


def is_buffer(value: Any) -> bool:
    return isinstance(value, tvm.ir.expr.Var) and isinstance(value.ty, tirx.BufferType)


def to_region(value: Any, construct: str, what: str) -> tuple[Region, bool]:
    """(region, is_origin) of a tile-op operand; `is_origin` for an element used as the region's corner."""
    from ..language.builder import current_trace

    if is_buffer(value):
        shape = tuple(value.ty.shape)
        return Region(value, tuple(tirx.const(0, "int32") for _ in shape), shape), False
    if isinstance(value, TensorRegion):
        return Region.from_ir(value), False
    if isinstance(value, TensorLoad):
        return Region(value.source, tuple(value.indices), tuple(tirx.const(1, "int32") for _ in value.indices)), True
    raise current_trace(construct).error(
        f"{construct}: {what} must be a buffer, a slice of one, or an element used as the origin; got {value!r}")
