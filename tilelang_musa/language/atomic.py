"""Atomics: read-modify-write `T.atomic_add` / `atomic_max` / `atomic_min` / `atomic_or`, the paired and quadrupled
adds `T.atomic_addx2` / `atomic_addx4`, and the whole-element `T.atomic_load` / `atomic_store`.

`memory_order` ("relaxed", "consume", "acquire", "release", "acq_rel", "seq_cst") adds the fences it asks for
around the access (atomic.h: a release fences before, an acquire after); a load takes no release side and a store
no acquire side, as upstream rules."""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.tirx.script import builder as Tb

from ..diagnostics import warn_once
from ..tileop import emit_tile_op
from ..tileop.atomic import MEMORY_ORDERS, Atomic, element_atomic, ordered
from ..tileop.copy import resolve_extents
from ..tileop.region import TensorLoad, TensorRegion, bound_slice, is_buffer, pair_dims, to_region
from .builder import kernel_trace, static_value


def _checked_order(trace, construct: str, memory_order: Any, allowed: tuple[str, ...] = tuple(MEMORY_ORDERS)) -> Any:
    """`memory_order` if `construct` takes it (a load has no release side, a store no acquire side)."""
    if memory_order is not None and memory_order not in allowed:
        raise trace.error(f"{construct} does not support memory_order={memory_order!r}; expected one of "
                          f"{', '.join(allowed)}")
    return memory_order


# the element types atomic.h's atomics take (tl::detail::is_atomic_element): no 8/16-bit integer atomics exist
ATOMIC_DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "uint32", "int64", "uint64")


def _check_atomic_dtype(trace, construct: str, name: str, dtype: Any) -> None:
    if str(dtype) not in ATOMIC_DTYPES:
        raise trace.error(f"{construct}: `{name}` is {dtype}; atomics take {', '.join(ATOMIC_DTYPES)} elements (no "
                          "8/16-bit integer or bool atomic exists)")


LOAD_ORDERS = ("relaxed", "consume", "acquire", "seq_cst")
_FLOAT_CODES = (tvm.runtime.DataTypeCode.FLOAT, tvm.runtime.DataTypeCode.BFLOAT)
STORE_ORDERS = ("relaxed", "release", "seq_cst")


def _atomic(kind: str, dst: Any, value: Any, return_prev: bool, memory_order: Any) -> Any:
    construct = f"T.atomic_{kind}"
    trace = kernel_trace(construct)
    memory_order = _checked_order(trace, construct, memory_order)
    dst, value = bound_slice(dst), bound_slice(value)
    value_is_tile = is_buffer(value) or isinstance(value, TensorRegion)
    if isinstance(dst, TensorLoad) and not value_is_tile:  # one element
        _check_atomic_dtype(trace, construct, dst.source.name, dst.ty.dtype)
        if isinstance(value, (int, float)):
            value = tirx.const(value, str(dst.ty.dtype))
        call = element_atomic(kind, dst, value, return_prev)
        if return_prev:
            if memory_order not in (None, "relaxed"):
                raise trace.error(f"{construct}(return_prev=True, memory_order={memory_order!r}): an ordered atomic "
                                  "that returns the old value is not supported yet; use memory_order='relaxed' and "
                                  "fence with a separate T.atomic_load/T.atomic_store")
            return call
        for c in ordered(call, memory_order):
            Tb.evaluate(c)
        return None
    if return_prev:
        raise trace.error(f"{construct}(return_prev=True) needs a single element as the destination")
    region, dst_origin = to_region(dst, construct, "dst")
    _check_atomic_dtype(trace, construct, region.name, region.dtype)
    if region.scope not in ("global", "shared", "shared.dyn"):
        raise trace.error(f"{construct}: the destination must be in global or shared memory; "
                          f"`{region.name}` is {region.scope}")
    if isinstance(value, tvm.ir.Expr) and not isinstance(value.ty, tvm.ir.PrimType) or not isinstance(
            value, (int, float, tvm.ir.Expr)):
        src, _ = to_region(value, construct, "value")
        if dst_origin:  # `T.atomic_add(C[by * 64, bx * 64], C_local)`: the region at that corner, C_local's shape
            _, region = resolve_extents(src, False, region, True, trace.error)
        if pair_dims(region, src) is None:
            raise trace.error(f"{construct}: value {src.describe()} and dst {region.describe()} differ in shape")
        value_arg = src.to_ir()
    else:
        value_arg = value if isinstance(value, tvm.ir.Expr) else tirx.const(value, region.dtype)
    emit_tile_op(Atomic.op_name, [region.to_ir(), value_arg], {"kind": kind, "memory_order": memory_order})
    return None


def atomic_add(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False,
               use_tma: bool = False) -> Any:
    """dst += value atomically (an element, or a region with a same-shaped region or a scalar value).
    `use_tma=True` (upstream: a TMA reduce-add of a shared tile into global memory) takes the same operands as
    upstream (dst in global memory, value a shared tile); MUSA's TME has no reduce-add store, so the tile is added
    by element atomics, with a one-time warning."""
    if use_tma:
        _check_tma_operands(dst, value, return_prev)
    return _atomic("add", dst, value, return_prev, memory_order)


def _check_tma_operands(dst: Any, value: Any, return_prev: bool) -> None:
    construct = "T.atomic_add(use_tma=True)"
    trace = kernel_trace(construct)
    value = bound_slice(value)
    if return_prev or not (is_buffer(value) or isinstance(value, TensorRegion)):
        raise trace.error(f"{construct} adds a shared tile into global memory: value must be a shared buffer or "
                          "region (and return_prev is not available)")
    src, _ = to_region(value, construct, "value")
    dst_region, _ = to_region(dst, construct, "dst")
    if src.scope not in ("shared", "shared.dyn") or dst_region.scope != "global":
        raise trace.error(f"{construct} adds a shared tile into global memory; got value `{src.name}` in "
                          f"{src.scope} and dst `{dst_region.name}` in {dst_region.scope}")
    warn_once("atomic_add.use_tma", f"{construct} at {trace.loc}: MUSA's TME has no reduce-add store; the tile is "
              "added into global memory by element atomics (the same result)")


def atomic_max(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False) -> Any:
    """dst = max(dst, value) atomically."""
    return _atomic("max", dst, value, return_prev, memory_order)


def atomic_min(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False) -> Any:
    """dst = min(dst, value) atomically."""
    return _atomic("min", dst, value, return_prev, memory_order)


def _element(trace, construct: str, what: str, value: Any, scopes: tuple[str, ...]) -> Any:
    if not isinstance(value, TensorLoad):
        raise trace.error(f"{construct}: {what} must be one element of a buffer (`A[i, j]`); got {value!r}")
    scope = str(value.source.ty.storage_scope)
    if scope not in scopes:
        raise trace.error(f"{construct}: {what} `{value.source.name}` is {scope}; it must be in {' or '.join(scopes)}")
    return value


def _lanes_origin(trace, construct: str, what: str, value: Any, lanes: int, scopes: tuple[str, ...]) -> Any:
    """The first of `lanes` consecutive elements, given as that element (`A[i, j]`), a slice of exactly `lanes`
    elements along the last dimension (`A[i, j:j + 4]`, also bound to a name first), a Ramp index
    (`A[T.Ramp(j, 1, 4)]`) or a whole buffer of `lanes` elements."""
    value = bound_slice(value)
    if is_buffer(value) or isinstance(value, TensorRegion):
        region, _ = to_region(value, construct, what)
        extents = [static_value(e) for e in region.extents]
        if extents[-1] != lanes or any(e != 1 for e in extents[:-1]):
            raise trace.error(f"{construct}: {what} {region.describe()} must be {lanes} consecutive elements along "
                              "its last dimension")
        value = region.buffer[tuple(region.mins)]
    elif isinstance(value, TensorLoad) and isinstance(value.indices[-1], tirx.Ramp):
        ramp = value.indices[-1]
        if static_value(ramp.stride) != 1 or static_value(ramp.lanes) != lanes:
            raise trace.error(f"{construct}: {what} index {ramp} must step by 1 over {lanes} lanes")
        value = value.source[tuple(value.indices[:-1]) + (ramp.base,)]
    return _element(trace, construct, what, value, scopes)


def _atomic_add_lanes(lanes: int, dst: Any, value: Any, return_prev: bool, memory_order: Any) -> Any:
    construct = f"T.atomic_addx{lanes}"
    trace = kernel_trace(construct)
    memory_order = _checked_order(trace, construct, memory_order)
    dst = _lanes_origin(trace, construct, "dst", dst, lanes, ("global", "shared", "shared.dyn"))
    _check_atomic_dtype(trace, construct, dst.source.name, dst.ty.dtype)
    # the value's lanes are read from consecutive addresses: not from a fragment, whose elements a layout places
    value = _lanes_origin(trace, construct, "value", value, lanes,
                          ("global", "shared", "shared.dyn", "local", "local.var"))
    lane_values = None
    if str(dst.ty.dtype) != str(value.ty.dtype):
        if return_prev or not all(tvm.runtime.DataType(str(d)).type_code in _FLOAT_CODES
                                  for d in (dst.ty.dtype, value.ty.dtype)):
            raise trace.error(f"{construct}: dst is {dst.ty.dtype} but value is {value.ty.dtype} (lanes of another "
                              "float type are converted only without return_prev)")
        # upstream converts each lane to dst's type: the lanes are passed as values, not by address
        lane_values = [tirx.Cast(str(dst.ty.dtype), value.source[tuple(value.indices[:-1]) + (value.indices[-1] + k,)])
                       for k in range(lanes)]
    if return_prev:  # the old lanes, as one vector: `Prev[0:2] = T.atomic_addx2(..., return_prev=True)`
        if memory_order not in (None, "relaxed"):
            raise trace.error(f"{construct}(return_prev=True, memory_order={memory_order!r}): an ordered atomic that "
                              "returns the old value is not supported yet; use memory_order='relaxed'")
        return tirx.call_extern(f"{dst.ty.dtype}x{lanes}", f"tl::AtomicAddx{lanes}Ret", tirx.address_of(dst),
                                tirx.address_of(value))
    operands = lane_values if lane_values is not None else [tirx.address_of(value)]
    call = tirx.call_extern("int32", f"tl::AtomicAddx{lanes}", tirx.address_of(dst), *operands)
    for c in ordered(call, memory_order):
        Tb.evaluate(c)
    return None


def atomic_addx2(dst: Any, value: Any, return_prev: bool = False, memory_order: str | None = None) -> Any:
    """dst[0:2] += value[0:2], each lane atomically (16-bit lanes as one 32-bit atomic): `dst` and `value` are the
    first elements of two consecutive ones."""
    return _atomic_add_lanes(2, dst, value, return_prev, memory_order)


def atomic_addx4(dst: Any, value: Any, return_prev: bool = False, memory_order: str | None = None) -> Any:
    """dst[0:4] += value[0:4], each lane atomically (see T.atomic_addx2)."""
    return _atomic_add_lanes(4, dst, value, return_prev, memory_order)


def atomic_load(src: Any, memory_order: str = "seq_cst") -> Any:
    """The element `src`, read whole and once, with the memory order's fence."""
    trace = kernel_trace("T.atomic_load")
    memory_order = _checked_order(trace, "T.atomic_load", memory_order, LOAD_ORDERS) or "seq_cst"
    src = _element(trace, "T.atomic_load", "src", src, ("global", "shared", "shared.dyn"))
    _check_atomic_dtype(trace, "T.atomic_load", src.source.name, src.ty.dtype)
    return tirx.call_extern(str(src.ty.dtype), f"tl::AtomicLoad<{MEMORY_ORDERS[memory_order]}>", tirx.address_of(src))


def atomic_store(dst: Any, value: Any, memory_order: str = "seq_cst") -> None:
    """dst = value, written whole and once, with the memory order's fence."""
    trace = kernel_trace("T.atomic_store")
    memory_order = _checked_order(trace, "T.atomic_store", memory_order, STORE_ORDERS) or "seq_cst"
    dst = _element(trace, "T.atomic_store", "dst", dst, ("global", "shared", "shared.dyn"))
    _check_atomic_dtype(trace, "T.atomic_store", dst.source.name, dst.ty.dtype)
    if isinstance(value, (int, float)):
        value = tirx.const(value, str(dst.ty.dtype))
    Tb.evaluate(tirx.call_extern("int32", f"tl::AtomicStore<{MEMORY_ORDERS[memory_order]}>", tirx.address_of(dst),
                                 value))


def atomic_or(dst: Any, value: Any, memory_order: str | None = None) -> None:
    """dst |= value atomically, for one element of a 32- or 64-bit integer buffer in global or shared memory."""
    trace = kernel_trace("T.atomic_or")
    memory_order = _checked_order(trace, "T.atomic_or", memory_order)
    dst = _element(trace, "T.atomic_or", "dst", bound_slice(dst), ("global", "shared", "shared.dyn"))
    dtype = str(dst.ty.dtype)
    if dtype not in ("int32", "uint32", "int64", "uint64"):
        raise trace.error(f"T.atomic_or: dst `{dst.source.name}` is {dtype}; it must be a 32- or 64-bit integer")
    value = tirx.const(value, dtype) if isinstance(value, int) else value
    if not isinstance(value, tvm.ir.Expr) or not isinstance(value.ty, tvm.ir.PrimType):
        raise trace.error(f"T.atomic_or: value must be one integer (a scalar expression); got {value!r}")
    if str(value.ty.dtype) != dtype:
        value = tirx.Cast(dtype, value)
    for c in ordered(tirx.call_extern("int32", "tl::AtomicOr", tirx.address_of(dst), value), memory_order):
        Tb.evaluate(c)
