"""Warp votes and block-wide predicate reductions, TileLang-MUSA's names: `T.any_sync`, `T.all_sync`,
`T.ballot_sync`, `T.ballot`, `T.activemask`, `T.match_any_sync`, `T.match_all_sync`, `T.__ffs`, `T.__fns`,
`T.syncthreads_count/and/or`.

They call the CUDA-named MUSA built-ins. A ballot or active mask is the built-in's 32-bit lane mask zero-extended
to uint64, as upstream returns it; on mp_22's 128-lane warps a 32-bit mask cannot hold every lane (the simulator
reports a ballot there as not modelled rather than guess).
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from .builder import as_expr, expression_trace, operand_type_error

_FULL_MASK = 0xFFFFFFFF


def _predicate(construct: str, predicate: Any) -> Any:
    expression_trace(construct)  # an expression outside a kernel too, as upstream
    predicate = as_expr(predicate)
    if isinstance(predicate, float) or (isinstance(predicate, tvm.ir.Expr) and str(predicate.ty.dtype) != "bool"
                                        and tvm.DataType(str(predicate.ty.dtype)).type_code
                                        not in (tvm.DataTypeCode.INT, tvm.DataTypeCode.UINT)):
        # a float's truth would be lost in the built-in's int predicate (0.5 becomes 0)
        got = "float" if isinstance(predicate, float) else predicate.ty.dtype
        raise operand_type_error(construct, f"{construct} requires an integer or boolean predicate; got {got}")
    if not isinstance(predicate, tvm.ir.Expr):
        return tirx.const(int(bool(predicate)), "int32")
    return predicate if str(predicate.ty.dtype) == "int32" else tirx.Cast("int32", predicate)


def _mask(mask: Any) -> Any:
    return tirx.const(mask & _FULL_MASK, "uint32") if isinstance(mask, int) else tirx.Cast("uint32", as_expr(mask))


def any_sync(predicate: Any, mask: Any = _FULL_MASK) -> Any:
    """Nonzero if `predicate` is nonzero in any lane of `mask` (`__any_sync`)."""
    return tirx.call_extern("int32", "__any_sync", _mask(mask), _predicate("T.any_sync", predicate))


def all_sync(predicate: Any, mask: Any = _FULL_MASK) -> Any:
    """Nonzero if `predicate` is nonzero in every lane of `mask` (`__all_sync`)."""
    return tirx.call_extern("int32", "__all_sync", _mask(mask), _predicate("T.all_sync", predicate))


def ballot_sync(predicate: Any, mask: Any = _FULL_MASK) -> Any:
    """uint64 with bit n set if lane n of `mask` has a nonzero `predicate` (`__ballot_sync`, zero-extended)."""
    vote = tirx.call_extern("uint32", "__ballot_sync", _mask(mask), _predicate("T.ballot_sync", predicate))
    return tirx.Cast("uint64", vote)


def ballot(predicate: Any) -> Any:
    """`T.ballot_sync` over the whole warp."""
    return ballot_sync(predicate)


def _match_value(construct: str, value: Any) -> Any:
    expression_trace(construct)
    value = as_expr(value)
    if not isinstance(value, tvm.ir.Expr):
        value = tirx.const(value, "int32" if isinstance(value, int) else "float32")
    dtype = tvm.DataType(str(value.ty.dtype))
    if dtype.lanes != 1 or dtype.bits not in (32, 64) or dtype.type_code not in (
            tvm.DataTypeCode.INT, tvm.DataTypeCode.UINT, tvm.DataTypeCode.FLOAT):
        raise operand_type_error(construct, f"{construct} compares 32- or 64-bit integers or floats; got "
                                            f"{value.ty.dtype}")
    return value


def match_any_sync(value: Any, mask: Any = _FULL_MASK) -> Any:
    """uint32 mask of the lanes of `mask` whose `value` equals the caller's (`__match_any_sync`)."""
    return tirx.call_extern("uint32", "__match_any_sync", _mask(mask), _match_value("T.match_any_sync", value))


def match_all_sync(value: Any, mask: Any = _FULL_MASK) -> Any:
    """`mask` (uint32) if every lane of it holds the same `value`, else 0 (`__match_all_sync`, its predicate
    output dropped: it is `result != 0`)."""
    return tirx.call_extern("uint32", "tl::match_all_sync", _mask(mask), _match_value("T.match_all_sync", value))


def activemask() -> Any:
    """uint64 with a bit set for each lane of the warp that is running this call (`__activemask`)."""
    expression_trace("T.activemask")
    return tirx.Cast("uint64", tirx.call_extern("uint32", "__activemask"))


def __ffs(value: Any) -> Any:  # noqa: N807 - upstream's name
    """One-based position of the lowest set bit of an integer, 0 for 0 (`__ffs`, `__ffsll` for 64 bits)."""
    value = as_expr(value)
    dtype = tvm.DataType(str(value.ty.dtype))
    if dtype.type_code not in (tvm.DataTypeCode.INT, tvm.DataTypeCode.UINT) or dtype.lanes != 1:
        raise operand_type_error("T.__ffs", f"T.__ffs takes an integer; got {value.ty.dtype}")
    signed = "int64" if dtype.bits > 32 else "int32"
    if dtype.bits == 64 or dtype.bits == 32:  # same width: keep the bits
        value = value if dtype.type_code == tvm.DataTypeCode.INT else tirx.reinterpret(signed, value)
    else:  # narrower: widening keeps the lowest set bit
        value = tirx.Cast(signed, value)
    return tirx.call_extern("int32", "__ffsll" if signed == "int64" else "__ffs", value)


def __fns(mask: Any, base: Any, offset: Any) -> Any:  # noqa: N807 - upstream's name
    """The position (0-31) of the |offset|-th set bit of the 32-bit `mask` from bit `base` (upward for a positive
    offset, downward for a negative one; 0 asks whether bit `base` is set), 0xFFFFFFFF (uint32) if there is none."""
    expression_trace("T.__fns")
    args = []
    for what, arg, dtype in (("mask", mask, "uint32"), ("base", base, "uint32"), ("offset", offset, "int32")):
        arg = as_expr(arg)
        if isinstance(arg, int) and not isinstance(arg, bool):
            arg = tirx.const(arg & 0xFFFFFFFF if dtype == "uint32" else arg, dtype)
        if not isinstance(arg, tvm.ir.Expr) or tvm.DataType(str(arg.ty.dtype)).type_code not in (
                tvm.DataTypeCode.INT, tvm.DataTypeCode.UINT):
            raise operand_type_error("T.__fns", f"T.__fns: {what} must be an integer; got {arg!r}")
        args.append(arg if str(arg.ty.dtype) == dtype else tirx.Cast(dtype, arg))
    return tirx.call_extern("uint32", "tl::fns", *args)


def _block_vote(construct: str, builtin: str, predicate: Any) -> Any:
    return tirx.call_extern("int32", builtin, _predicate(construct, predicate))


def syncthreads_count(predicate: Any) -> Any:
    """A block barrier that returns how many threads of the block passed a nonzero `predicate`."""
    return _block_vote("T.syncthreads_count", "__syncthreads_count", predicate)


def syncthreads_and(predicate: Any) -> Any:
    """A block barrier that returns nonzero if every thread of the block passed a nonzero `predicate`."""
    return _block_vote("T.syncthreads_and", "__syncthreads_and", predicate)


def syncthreads_or(predicate: Any) -> Any:
    """A block barrier that returns nonzero if some thread of the block passed a nonzero `predicate`."""
    return _block_vote("T.syncthreads_or", "__syncthreads_or", predicate)
