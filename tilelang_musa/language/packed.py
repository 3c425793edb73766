"""Packed two-lane arithmetic (upstream's `T.add2`, `T.sub2`, `T.mul2`, `T.fma2`, `T.max2`, `T.min2`, `T.abs2`).

Each takes two-lane vectors of one dtype (float32x2, float16x2 or bfloat16x2), such as `A[T.Ramp(2 * i, 1, 2)]`,
and computes lane by lane in that dtype (a float16 lane rounds to float16, as the packed instruction does; fma2
rounds once). Printed as `tl::add2(a, b)` & co. (tl_templates/musa/common.h), one call a pair of lanes.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx

from .builder import as_expr, current_trace

PACKED_X2_DTYPES = ("float32x2", "float16x2", "bfloat16x2")


def _packed(name: str, *operands: Any) -> Any:
    construct = f"T.{name}"
    trace = current_trace(construct)
    values = [as_expr(tirx.convert(v) if isinstance(v, (int, float)) else v) for v in operands]
    dtypes = [str(v.ty.dtype) if hasattr(v, "ty") and hasattr(v.ty, "dtype") else type(v).__name__ for v in values]
    for k, dtype in enumerate(dtypes):
        if dtype not in PACKED_X2_DTYPES:
            raise trace.error(f"{construct}: operand {k} must be a two-lane vector of {', '.join(PACKED_X2_DTYPES)} "
                              f"(e.g. `A[T.Ramp(2 * i, 1, 2)]`); got {dtype}")
    if len(set(dtypes)) > 1:
        raise trace.error(f"{construct}: the operands must share one dtype; got {', '.join(dtypes)}")
    return tirx.call_extern(dtypes[0], f"tl::{name}", *values)


def add2(x: Any, y: Any) -> Any:
    """x + y, lane by lane."""
    return _packed("add2", x, y)


def sub2(x: Any, y: Any) -> Any:
    """x - y, lane by lane."""
    return _packed("sub2", x, y)


def mul2(x: Any, y: Any) -> Any:
    """x * y, lane by lane."""
    return _packed("mul2", x, y)


def fma2(x: Any, y: Any, z: Any) -> Any:
    """x * y + z, lane by lane, rounded once."""
    return _packed("fma2", x, y, z)


def max2(x: Any, y: Any) -> Any:
    """The larger of x and y, lane by lane (a NaN lane yields the other operand, as fmaxf)."""
    return _packed("max2", x, y)


def min2(x: Any, y: Any) -> Any:
    """The smaller of x and y, lane by lane (a NaN lane yields the other operand, as fminf)."""
    return _packed("min2", x, y)


def abs2(x: Any) -> Any:
    """|x|, lane by lane."""
    return _packed("abs2", x)
