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


# Element types whose adds pair up: two consecutive elements are one 32-bit atomic of the device library (atomicAdd
# on half2 / __mt_bfloat162; docs/ATOMICS_ON_MUSA.md). float32 keeps one atomic an element there.
PAIRED_ADD_DTYPES = ("float16", "bfloat16")
_LANE_ADDS = {"tl::AtomicAddx2": 2, "tl::AtomicAddx2Ret": 2, "tl::AtomicAddx4": 4, "tl::AtomicAddx4Ret": 4}


def pairable_add(stmt: Any) -> tuple[Any, Any] | None:
    """(destination, value) of `stmt` when it is one relaxed `tl::AtomicAdd(&D[i], v)` of a float16 / bfloat16
    element (v of D's type: an element, or an expression such as a cast): two of them at consecutive elements are
    one `tl::AtomicAddx2`."""
    call = stmt.value if isinstance(stmt, tirx.Evaluate) else None
    if not (isinstance(call, tvm.ir.Call) and str(call.op.name) == "tirx.call_extern" and len(call.args) == 3
            and isinstance(call.args[0], tvm.ir.StringImm) and call.args[0].value == FUNCTIONS["add"]):
        return None
    address, value = call.args[1], call.args[2]
    dst = address.args[0] if isinstance(address, tvm.ir.Call) and str(address.op.name) == "tirx.address_of" else None
    if dst is None or str(dst.ty.dtype) not in PAIRED_ADD_DTYPES:
        return None
    if str(value.ty.dtype) != str(dst.ty.dtype):
        return None
    return dst, value


def lane_add_alignment(call: Any) -> tuple[Any, int] | None:
    """(the destination buffer, the bytes its address must be a multiple of) for a `tl::AtomicAddx2/x4[Ret]` call:
    16-bit lanes are updated in 4-byte pairs, wider lanes one element at a time; None for any other call."""
    if str(call.op.name) != "tirx.call_extern" or len(call.args) < 2 or not isinstance(call.args[0], tvm.ir.StringImm):
        return None
    address = call.args[1]
    if call.args[0].value not in _LANE_ADDS or not isinstance(address, tvm.ir.Call) or not address.args or \
            not isinstance(address.args[0], tvm.ir.expr.TensorLoad):
        return None
    dst = address.args[0]
    bits = tvm.runtime.DataType(str(dst.ty.dtype)).bits
    return dst.source, 4 if bits == 16 else bits // 8
