"""`T.atomic_add / atomic_max / atomic_min` over a region: dst[region] = op(dst[region], value) atomically.

Lowered to a `T.Parallel` nest of element atomics (`tl::AtomicAdd(&dst[i], v)` from atomic.h); a
destination element outside its tensor is skipped by the bounds guards like a store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm
from tvm import tirx

from ..errors import SourceLoc
from ..ir.utils import seq
from .base import LowerArgs, TileOp, call_attr, call_loc
from .parallel import parallel_nest
from .region import Region, TensorRegion, is_unit, pair_dims, paired_indices

FUNCTIONS = {"add": "tl::AtomicAdd", "max": "tl::AtomicMax", "min": "tl::AtomicMin"}
# std::memory_order's numbering, as atomic.h's tl::MemoryOrder.
MEMORY_ORDERS = {"relaxed": 0, "consume": 1, "acquire": 2, "release": 3, "acq_rel": 4, "seq_cst": 5}


def ordered(call: Any, memory_order: str | None) -> list[Any]:
    """The calls that perform one atomic access `call` in its memory order: the fences it asks for around it
    (atomic.h's tl::fence_before / fence_after; none when relaxed)."""
    order = MEMORY_ORDERS[memory_order or "relaxed"]
    if order == 0:
        return [call]
    return [tirx.call_extern("int32", f"tl::fence_before<{order}>"), call,
            tirx.call_extern("int32", f"tl::fence_after<{order}>")]


def element_atomic(kind: str, load: Any, value: Any, return_prev: bool = False) -> Any:
    """The call `tl::Atomic<Kind>[Ret](&dst[idx], value)` for one element."""
    dtype = str(load.ty.dtype)
    if isinstance(value, tvm.ir.Expr) and str(value.ty.dtype) != dtype:
        value = tirx.Cast(dtype, value)
    name = FUNCTIONS[kind] + ("Ret" if return_prev else "")
    return tirx.call_extern(dtype if return_prev else "int32", name, tirx.address_of(load), value)


@dataclass(frozen=True)
class Atomic(TileOp):
    op_name = "tl.tileop.atomic"
    kind: str
    dst: Region
    value: Any  # a Region (same extents as dst) or a scalar expression
    loc: SourceLoc | None = None
    memory_order: str | None = None

    @classmethod
    def from_call(cls, call: tvm.ir.Call) -> "Atomic":
        value = call.args[1]
        value = Region.from_ir(value) if isinstance(value, TensorRegion) else value
        order = call_attr(call, "memory_order")
        return cls(str(call_attr(call, "kind")), Region.from_ir(call.args[0]), value, call_loc(call),
                   None if order is None else str(order))

    def lower(self, args: LowerArgs) -> Any:
        if isinstance(self.value, Region):
            dims = pair_dims(self.dst, self.value)
            if dims is None:
                raise self.error(f"T.atomic_{self.kind}: value {self.value.describe()} and dst "
                                 f"{self.dst.describe()} differ in shape")
        else:
            dims = ([d for d, e in enumerate(self.dst.extents) if not is_unit(e)],) * 2
        extents = [self.dst.extents[d] for d in dims[0]] or [tirx.const(1, "int32")]

        def body(idx):
            dst_index, value_index = paired_indices(self.dst, self.value if isinstance(self.value, Region)
                                                    else self.dst, dims, idx)
            value = self.value.buffer[tuple(value_index)] if isinstance(self.value, Region) else self.value
            calls = ordered(element_atomic(self.kind, self.dst.buffer[tuple(dst_index)], value), self.memory_order)
            return seq([tirx.Evaluate(c) for c in calls])

        return parallel_nest(extents, body, self.loc)
