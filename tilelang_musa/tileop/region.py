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

from ..ir.trace import OPEN_TRACES, current_trace

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

    def contiguous_count(self) -> int | None:
        """The number of elements if the region is one contiguous run of its row-major buffer (size-1 dimensions,
        then one partial dimension, then whole ones) with constant extents; None otherwise."""
        extents = self.static_extents()
        if any(e is None for e in extents):
            return None
        shape = [int(e) if isinstance(e, tirx.IntImm) else e for e in self.buffer.ty.shape]
        dims = [d for d, e in enumerate(extents) if e != 1]
        if dims and any(not isinstance(shape[d], int) or extents[d] != shape[d] for d in range(dims[0] + 1, len(extents))):
            return None
        count = 1
        for e in extents:
            count *= e
        return count

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


def bound_slice(value: Any) -> Any:
    """The slice a name bound to its vector value stands for (`b = A[0, 0:4]`, language/runtime.py), where a
    tile op takes `b`; any other value as it is."""
    if isinstance(value, tvm.ir.expr.Var) and OPEN_TRACES:
        for var, region in getattr(OPEN_TRACES[-1], "let_regions", ()):
            if var.same_as(value):
                return region
    return value


def to_region(value: Any, construct: str, what: str) -> tuple[Region, bool]:
    """(region, is_origin) of a tile-op operand; `is_origin` for an element used as the region's corner."""
    value = bound_slice(value)
    if is_buffer(value):
        shape = tuple(value.ty.shape)
        return Region(value, tuple(tirx.const(0, "int32") for _ in shape), shape), False
    if isinstance(value, TensorRegion):
        return Region.from_ir(value), False
    if isinstance(value, TensorLoad):
        return Region(value.source, tuple(value.indices), tuple(tirx.const(1, "int32") for _ in value.indices)), True
    raise current_trace(construct).error(
        f"{construct}: {what} must be a buffer, a slice of one, or an element used as the origin; got {value!r}")


def is_unit(extent: Any) -> bool:
    return (isinstance(extent, tirx.IntImm) and int(extent.value) == 1) or (isinstance(extent, int) and extent == 1)


def pair_dims(a: Region, b: Region, run_time_extents: bool = False,
              any_extents: bool = False) -> tuple[list[int], list[int]] | None:
    """The non-unit dimensions of `a` and `b`, paired in order, if their extents agree (else None): two regions
    have the same shape up to size-1 dimensions. With `run_time_extents`, a pair whose extents are not both
    constants also agrees (the caller works on the smaller of the two at run time: common_extents); with
    `any_extents`, every pair does (only the number of non-unit dimensions must match)."""
    dims_a = [d for d, e in enumerate(a.extents) if not is_unit(e)]
    dims_b = [d for d, e in enumerate(b.extents) if not is_unit(e)]
    ana = tvm.sym.Analyzer()

    def agree(x, y):
        if any_extents or ana.can_prove_equal(x, y):
            return True
        return run_time_extents and not (isinstance(x, tirx.IntImm) and isinstance(y, tirx.IntImm))

    if len(dims_a) != len(dims_b) and run_time_extents:
        return _pair_run_time_with_units(a, b, agree)
    if len(dims_a) != len(dims_b) or not all(agree(a.extents[x], b.extents[y]) for x, y in zip(dims_a, dims_b)):
        return None
    return dims_a, dims_b


def _pair_run_time_with_units(a: Region, b: Region, agree) -> tuple[list[int], list[int]] | None:
    """Regions whose numbers of non-unit dimensions differ, paired from the innermost dimension out (upstream's
    tail alignment), where a size-1 dimension may pair with a run-time extent: `T.copy(x[0:n], frag)` into a
    1-element fragment covers min(n, 1) elements, provably inside both regions. A size-1 dimension against a
    constant extent still does not pair (part of one region would be left out or overrun), and dimensions left
    over on either side must be size 1."""
    pairs = []
    rank = min(len(a.extents), len(b.extents))
    for x, y in zip(range(len(a.extents) - 1, -1, -1), range(len(b.extents) - 1, -1, -1)):
        ex, ey = a.extents[x], b.extents[y]
        if is_unit(ex) and is_unit(ey):
            continue
        if is_unit(ex) or is_unit(ey):
            if isinstance(ey if is_unit(ex) else ex, (tirx.IntImm, int)):
                return None
        elif not agree(ex, ey):
            return None
        pairs.append((x, y))
    leftover = list(a.extents[:len(a.extents) - rank]) + list(b.extents[:len(b.extents) - rank])
    if not pairs or not all(is_unit(e) for e in leftover):
        return None
    pairs.reverse()
    return [x for x, _ in pairs], [y for _, y in pairs]


def common_extents(a: Region, b: Region, dims: tuple[list[int], list[int]]) -> list[Any]:
    """The extents of the paired dimensions: equal ones as they are, others the smaller of the two."""
    ana = tvm.sym.Analyzer()
    out = []
    for x, y in zip(*dims):
        ex, ey = a.extents[x], b.extents[y]
        out.append(ex if ana.can_prove_equal(ex, ey) else ana.simplify(tirx.min(ex, ey)))
    return out


def paired_indices(a: Region, b: Region, dims: tuple[list[int], list[int]], idx: list[Any]) -> tuple[list, list]:
    """Element indices into `a` and `b` for loop indices `idx` over their paired dimensions."""
    index_a, index_b = list(a.mins), list(b.mins)
    for k, (x, y) in enumerate(zip(*dims)):
        index_a[x] = index_a[x] + idx[k]
        index_b[y] = index_b[y] + idx[k]
    return index_a, index_b
