"""Python integers beside an integer expression in `&`, `|`, `^` take the expression's type.

The stock wheel's overloads of these operators turn a Python int into an int32 constant first, so on a uint32
`x & 0xFFFFFFFF` fails ("cannot make uint from negative value -1") and on an int64 `x & 0x100000000` silently
becomes `x & 0`. Upstream TileLang fixes this in its TVM fork; without a fork, `install()` wraps the overloads
(and `T.bitwise_and/or/xor` use `typed_operand`): an int that fits the expression's type becomes a constant of
that type, a wider one an int64 (or uint64) constant, so the usual type promotion applies.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from .. import _wheel_patches


def _fits(value: int, dtype: tvm.DataType) -> bool:
    bits = dtype.bits
    if dtype.type_code == tvm.DataTypeCode.UINT:
        return 0 <= value < (1 << bits)
    return -(1 << (bits - 1)) <= value < (1 << (bits - 1))


def typed_operand(other: Any, expr: Any) -> Any:
    """`other` as a constant of `expr`'s integer type if it is a Python int that fits it; wider ints as int64 /
    uint64 constants; anything else unchanged."""
    if not isinstance(other, int) or isinstance(other, bool) or not isinstance(expr, tvm.ir.Expr):
        return other
    ty = getattr(expr, "ty", None)
    if not isinstance(ty, tvm.ir.PrimType):
        return other
    dtype = tvm.DataType(str(ty.dtype))
    if dtype.type_code not in (tvm.DataTypeCode.INT, tvm.DataTypeCode.UINT) or dtype.lanes != 1:
        return other
    if _fits(other, dtype):
        return tirx.const(other, str(dtype))
    for wide in ("int64", "uint64"):
        if _fits(other, tvm.DataType(wide)):
            return tirx.const(other, wide)
    raise OverflowError(f"integer {other:#x} does not fit in 64 bits")


def install() -> None:
    """Wrap the stock bitwise-operator overloads once per process (_wheel_patches.py makes the change)."""
    _wheel_patches.wrap_int_operators(typed_operand)
