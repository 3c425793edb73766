"""Math and expression helpers of the language (`T.exp`, `T.max`, `T.ceildiv`, `T.if_then_else`, ...).

Static arguments (Python numbers) stay static where the result is a size (`T.ceildiv(4096, 256)` is 16),
so grid extents and shapes fold to constants.
"""

from __future__ import annotations

import builtins
import functools
from typing import Any, Callable

import tvm
from tvm import tirx

from ..ir.trace import OPEN_TRACES
from .builder import as_expr, current_trace, static_value
from .cast_rounding import rounded_cast
from .dtypes import canonical_dtype
from .int_operands import typed_operand


def _static_int(*values: Any) -> list[int] | None:
    out = []
    for v in values:
        s = static_value(v)
        if s is None or isinstance(s, bool) and not isinstance(v, bool):
            return None
        out.append(s)
    return out


def ceildiv(a: Any, b: Any) -> Any:
    ints = _static_int(a, b)
    if ints is not None:
        return -(-ints[0] // ints[1])
    return tirx.floordiv(a + b - 1, b)


def align_up(x: Any, y: Any) -> Any:
    """x rounded up to a multiple of y (`T.ceildiv(x, y) * y`). Example: T.align_up(n, 16)"""
    return ceildiv(x, y) * y


def floordiv(a: Any, b: Any) -> Any:
    ints = _static_int(a, b)
    return ints[0] // ints[1] if ints is not None else tirx.floordiv(a, b)


def floormod(a: Any, b: Any) -> Any:
    ints = _static_int(a, b)
    return ints[0] % ints[1] if ints is not None else tirx.floormod(a, b)


def truncdiv(a: Any, b: Any) -> Any:
    """a / b rounded toward zero (C's `/` on integers)."""
    ints = _static_int(a, b)
    if ints is not None:
        return builtins.abs(ints[0]) // builtins.abs(ints[1]) * (1 if (ints[0] < 0) == (ints[1] < 0) else -1)
    return tirx.truncdiv(a, b)


def truncmod(a: Any, b: Any) -> Any:
    """The remainder of truncdiv, with a's sign (C's `%` on integers)."""
    ints = _static_int(a, b)
    if ints is not None:
        return ints[0] - truncdiv(ints[0], ints[1]) * ints[1]
    return tirx.truncmod(a, b)


def _fold(static_op, ir_op, values: tuple) -> Any:
    if all(isinstance(v, (int, float)) for v in values):
        return static_op(values)
    out = values[0]
    for v in values[1:]:
        out = ir_op(out, v)
    return out


def max(a: Any, b: Any, *rest: Any) -> Any:  # noqa: A001 - the language's T.max
    return _fold(builtins.max, tirx.max, (a, b, *rest))


def min(a: Any, b: Any, *rest: Any) -> Any:  # noqa: A001 - the language's T.min
    return _fold(builtins.min, tirx.min, (a, b, *rest))


def clamp(dst: Any, min_val: Any, max_val: Any) -> Any:
    """`dst` limited to [min_val, max_val]."""
    return min(max(dst, min_val), max_val)


def if_then_else(cond: Any, then: Any, otherwise: Any) -> Any:
    cond = as_expr(cond)
    static = static_value(cond)
    if static is not None:
        return then if static else otherwise
    return tirx.if_then_else(cond, then, otherwise)


def cast(value: Any, dtype: Any, round: str = "", sat: bool | None = None, rbits: Any = None,  # noqa: A002
         span: Any = None) -> Any:
    """`value` converted to `dtype`. `round=`, `sat=`, `rbits=` choose the rounding and saturation (upstream's
    keywords; language/cast_rounding.py). `span` (TVM's source location) is taken, not used."""
    dtype = canonical_dtype(dtype)
    if round != "" or sat is not None or rbits is not None:
        return rounded_cast(value, dtype, round, sat, rbits)
    if isinstance(value, tvm.ir.Expr):
        return tirx.Cast(dtype, value)
    return tirx.const(value, dtype)


def Cast(dtype: Any, value: Any) -> Any:  # noqa: N802 - upstream's T.Cast(dtype, value)
    return cast(value, dtype)


def infinity(dtype: Any) -> Any:
    return tirx.const(float("inf"), canonical_dtype(dtype))


def ninf(dtype: Any) -> Any:
    return tirx.const(float("-inf"), canonical_dtype(dtype))


def max_value(dtype: Any) -> Any:
    return tirx.max_value(canonical_dtype(dtype))


def min_value(dtype: Any) -> Any:
    return tirx.min_value(canonical_dtype(dtype))


def _argument_error(message: str) -> Exception:
    """At the user's line inside a kernel; a plain ValueError for an expression built outside one."""
    return OPEN_TRACES[-1].error(message) if OPEN_TRACES else ValueError(message)


def _unary(name: str):
    op = getattr(tirx, name)

    def fn(x: Any, span: Any = None) -> Any:
        # the second parameter is TVM's (and so upstream's) `span`, a source location: taken, not used
        if span is not None and not isinstance(span, tvm.ir.Span):
            raise _argument_error(f"T.{name} takes one operand (and an optional source span), got a second "
                                  f"argument {span!r}")
        x = as_expr(x)
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            x = tirx.const(float(x), "float32")  # `T.sqrt(float(d))`: a number is a float32 constant, as TVM converts it
        if not isinstance(x, tvm.ir.Expr):
            raise _argument_error(f"T.{name} takes an expression or a number; got {type(x).__name__} {x!r}")
        if isinstance(x.ty, tvm.ir.PrimType) and str(x.ty.dtype).startswith(("int", "uint")):
            x = tirx.Cast("float32", x)  # `T.sin(bx)`: an integer argument is taken as float32 (as C promotes it)
        return op(x)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name}(x) (a MUSA math built-in after lowering)."
    return fn


_round_ties_to_even = _unary("round")
ROUNDING_MODES = ("ties-to-even", "ties-away-from-zero")


def round(x: Any, rounding_mode: str | None = "ties-to-even", span: Any = None) -> Any:  # noqa: A001
    """x rounded to the nearest integer (value of x's type). Halfway cases go to the even neighbour by default
    (`nearbyint`, as upstream and TVM); `rounding_mode="ties-away-from-zero"` rounds them away from zero (C's
    `round`, upstream's `tl::RoundTiesAwayFromZero`). An integer x is returned as it is in that mode.
    Example: T.round(x, "ties-away-from-zero")"""
    if rounding_mode is not None and not isinstance(rounding_mode, str):  # upstream's older T.round(x, span)
        rounding_mode, span = "ties-to-even", rounding_mode
    rounding_mode = rounding_mode or "ties-to-even"
    if rounding_mode not in ROUNDING_MODES:
        raise _argument_error(f"T.round: unsupported rounding_mode {rounding_mode!r}; expected one of "
                              f"{', '.join(map(repr, ROUNDING_MODES))}")
    if rounding_mode == "ties-to-even":
        return _round_ties_to_even(x, span)
    x = as_expr(x)
    dtype = tvm.DataType(str(x.ty.dtype))
    if dtype.type_code in (tvm.DataTypeCode.INT, tvm.DataTypeCode.UINT) or dtype.bits == 1:
        return x
    if dtype.bits == 64:
        return tirx.call_pure_extern(str(x.ty.dtype), "round", x)
    rounded = tirx.call_pure_extern("float32", "roundf", x if dtype.bits == 32 else tirx.Cast("float32", x))
    return rounded if dtype.bits == 32 else tirx.Cast(str(x.ty.dtype), rounded)  # exact: an integer fits x's type


exp = _unary("exp")
exp2 = _unary("exp2")
log = _unary("log")
log2 = _unary("log2")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
sin = _unary("sin")
cos = _unary("cos")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
tan = _unary("tan")
sinh = _unary("sinh")
cosh = _unary("cosh")
atan = _unary("atan")
erf = _unary("erf")
exp10 = _unary("exp10")
log10 = _unary("log10")
log1p = _unary("log1p")
nearbyint = _unary("nearbyint")
floor = _unary("floor")
ceil = _unary("ceil")
trunc = _unary("trunc")


def _float_predicate(name: str):
    """`T.isnan/isinf/isfinite`: one call of the MUSA math built-in (the stock wheel's isinf and isfinite lower to
    comparisons), 16-bit floats widened to float; integer operands are never NaN or infinite."""

    def fn(x: Any) -> Any:
        x = as_expr(x)
        dtype = tvm.DataType(str(x.ty.dtype))
        if dtype.type_code in (tvm.DataTypeCode.INT, tvm.DataTypeCode.UINT):
            return tirx.const(name == "isfinite", "bool")
        if dtype.bits < 32:
            x = tirx.Cast("float32", x)
        return tirx.call_pure_extern("bool", name, x)

    fn.__name__ = name
    fn.__doc__ = f"{name}(x) of a floating-point value."
    return fn


isnan = _float_predicate("isnan")
isinf = _float_predicate("isinf")
isfinite = _float_predicate("isfinite")


def abs(x: Any) -> Any:  # noqa: A001
    if isinstance(x, (int, float)):
        return builtins.abs(x)
    return tirx.abs(x)


def pow(x: Any, y: Any) -> Any:  # noqa: A001
    return tirx.pow(x, y)


def fmod(x: Any, y: Any) -> Any:
    """Remainder of x / y with the sign of x (C's fmod)."""
    return tirx.fmod(x, y)


# The rest of TIR's float math, by upstream's names (T.copysign etc. are TIR's ops there): C's functions of the same
# names on the device (float and double overloads; half and bfloat16 values go through float).
def copysign(x: Any, y: Any) -> Any:
    """x's magnitude with y's sign."""
    return tirx.copysign(x, y)


def hypot(x: Any, y: Any) -> Any:
    return tirx.hypot(x, y)


def nextafter(x: Any, y: Any) -> Any:
    return tirx.nextafter(x, y)


def atan2(y: Any, x: Any) -> Any:
    return tirx.atan2(y, x)


def ldexp(x: Any, e: Any) -> Any:
    """x * 2**e."""
    return tirx.ldexp(x, e)


asin, acos, asinh, acosh, atanh = tirx.asin, tirx.acos, tirx.asinh, tirx.acosh, tirx.atanh


def _bit_count(name: str, device_fns: tuple[str, str], x: Any) -> Any:
    """`device_fns`' 32- or 64-bit built-in of integer x, as an extern call: a T.Parallel loop that would vectorize
    it runs lane by lane (the built-ins take one integer), where TIR's own op would become a vector call."""
    x = as_expr(x)
    dtype = x.ty.dtype
    if not dtype.is_integer or dtype.bits not in (32, 64) or dtype.lanes != 1:
        raise current_trace(f"T.{name}").error(f"T.{name}: expects a 32- or 64-bit integer scalar; got {dtype}")
    return tirx.call_pure_extern("int32", device_fns[dtype.bits == 64], x)


def popcount(x: Any) -> Any:
    """The number of set bits of a 32- or 64-bit integer (`__popc` / `__popcll`), an int32."""
    return _bit_count("popcount", ("__popc", "__popcll"), x)


def clz(x: Any) -> Any:
    """The number of leading zero bits of a 32- or 64-bit integer (`__clz` / `__clzll`), an int32."""
    return _bit_count("clz", ("__clz", "__clzll"), x)


# Bit operations on integers, by upstream's names (`a & b` etc. work as well).
def bitwise_and(a: Any, b: Any) -> Any:
    a = as_expr(a)
    return tirx.bitwise_and(a, typed_operand(b, a))


def bitwise_or(a: Any, b: Any) -> Any:
    a = as_expr(a)
    return tirx.bitwise_or(a, typed_operand(b, a))


def bitwise_xor(a: Any, b: Any) -> Any:
    a = as_expr(a)
    return tirx.bitwise_xor(a, typed_operand(b, a))


def bitwise_not(a: Any) -> Any:
    return tirx.bitwise_not(as_expr(a))


def shift_left(a: Any, b: Any) -> Any:
    return tirx.shift_left(as_expr(a), b)


def shift_right(a: Any, b: Any) -> Any:
    """Arithmetic for signed integers, logical for unsigned (C's >>)."""
    return tirx.shift_right(as_expr(a), b)


def _reading_vars(fn: Callable) -> Callable:
    """`fn` with `T.alloc_var` scalars among its arguments read as their values (`T.max(x, 0)`)."""
    from .builder import value

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*(value(a) for a in args), **{k: value(v) for k, v in kwargs.items()})

    return wrapper


for _name in ("ceildiv", "floordiv", "floormod", "truncdiv", "truncmod", "max", "min", "clamp", "if_then_else", "cast", "Cast", "exp", "exp2",
              "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "tan", "sinh", "cosh", "atan", "erf",
              "exp10", "log10", "log1p", "nearbyint", "floor", "ceil", "round", "trunc", "abs", "pow", "fmod",
              "copysign", "hypot", "nextafter", "atan2", "ldexp", "asin", "acos", "asinh", "acosh", "atanh",
              "popcount", "clz",
              "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "shift_left", "shift_right"):
    globals()[_name] = _reading_vars(globals()[_name])
