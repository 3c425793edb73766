"""The device's fast approximate math (`T.__exp`, `T.__log`, ...) and explicitly rounded IEEE arithmetic
(`T.ieee_add(x, y, rounding_mode="rz")`, ...), as upstream TileLang names them.

Both are the MUSA (CUDA-named) math built-ins: `__expf` and friends, and `__fadd_rz` and friends (`__dadd_rz`
for double). The fast functions take float32; 16-bit floats go through float32. In the simulator the fast
functions are the exact ones and the rounded operations run with the host FPU in the requested mode.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx

from ..errors import CompileError
from ..ir.trace import OPEN_TRACES
from .builder import as_expr, current_trace, expression_trace, operand_type_error, value

ROUNDING_MODES = ("rn", "rz", "ru", "rd")
_HALF_LIKE = ("float16", "bfloat16")


def _fast(name: str, builtin: str):
    def fn(x: Any) -> Any:
        expression_trace(f"T.{name}")  # an expression outside a kernel too, as upstream
        x = as_expr(value(x))
        if isinstance(x, (int, float)):
            x = tirx.const(x, "float32")
        dtype = str(x.ty.dtype)
        if dtype == "float32":
            return tirx.call_extern("float32", builtin, x)
        if dtype in _HALF_LIKE:
            return tirx.Cast(dtype, tirx.call_extern("float32", builtin, tirx.Cast("float32", x)))
        if dtype == "float64":  # no fast double built-in exists (upstream's CUDA printer calls the exact one too)
            return tirx.call_extern("float64", builtin[2:-1], x)
        raise operand_type_error(f"T.{name}", f"T.{name} only supports floating-point inputs, but got {dtype}")

    fn.__name__ = name
    fn.__doc__ = (f"`{builtin}`: the device's fast approximation (float32; 16-bit floats through float32; float64 "
                  f"is the exact `{builtin[2:-1]}`).")
    return fn


__exp = _fast("__exp", "__expf")
__exp10 = _fast("__exp10", "__exp10f")
__log = _fast("__log", "__logf")
__log2 = _fast("__log2", "__log2f")
__log10 = _fast("__log10", "__log10f")
__tan = _fast("__tan", "__tanf")
__cos = _fast("__cos", "__cosf")
__sin = _fast("__sin", "__sinf")

def fast_rcp(x: Any) -> Any:
    """1 / x approximately: `__fdividef(1.0f, x)`, the device's fast division (float32; 16-bit floats through float32;
    float64 is the exact 1.0 / x). Upstream's T.fast_rcp (CUDA's approximate reciprocal)."""
    expression_trace("T.fast_rcp")
    x = as_expr(value(x))
    if isinstance(x, (int, float)):
        x = tirx.const(x, "float32")
    dtype = str(x.ty.dtype)
    if dtype == "float64":
        return tirx.const(1.0, "float64") / x
    if dtype not in ("float32", *_HALF_LIKE):
        raise operand_type_error("T.fast_rcp", f"T.fast_rcp only supports floating-point inputs, but got {dtype}")
    x32 = x if dtype == "float32" else tirx.Cast("float32", x)
    rcp = tirx.call_extern("float32", "__fdividef", tirx.const(1.0, "float32"), x32)
    return rcp if dtype == "float32" else tirx.Cast(dtype, rcp)


# op -> (float32 built-in, float64 built-in), each followed by _<mode>
_IEEE = {"add": ("__fadd", "__dadd"), "sub": ("__fsub", "__dsub"), "mul": ("__fmul", "__dmul"),
         "fmaf": ("__fmaf", "__fma"), "frcp": ("__frcp", "__drcp"), "fsqrt": ("__fsqrt", "__dsqrt"),
         "fdiv": ("__fdiv", "__ddiv"), "frsqrt": ("__frsqrt", None)}


def _ieee(op: str, args: tuple, rounding_mode: str) -> Any:
    construct = f"T.ieee_{op}"
    # An expression outside a kernel as well (as upstream): errors name the user's line when inside one.
    error = current_trace(construct).error if OPEN_TRACES else CompileError
    if rounding_mode not in ROUNDING_MODES:
        raise error(f"{construct}: Invalid rounding mode {rounding_mode!r}: not one of {', '.join(ROUNDING_MODES)}")
    exprs = [as_expr(value(a)) for a in args]
    typed = [e for e in exprs if hasattr(e, "ty")]
    dtype = str(typed[0].ty.dtype) if typed else "float32"
    if dtype not in ("float32", "float64") or _IEEE[op][dtype == "float64"] is None:
        raise error(f"{construct} takes float32{' or float64' if _IEEE[op][1] else ''} operands; got {dtype}")
    exprs = [tirx.const(e, dtype) if isinstance(e, (int, float)) else e for e in exprs]
    return tirx.call_extern(dtype, f"{_IEEE[op][dtype == 'float64']}_{rounding_mode}", *exprs)


def ieee_add(x: Any, y: Any, rounding_mode: str = "rn") -> Any:
    """x + y rounded as `rounding_mode` says: "rn" to nearest even, "rz" toward zero, "ru" up, "rd" down."""
    return _ieee("add", (x, y), rounding_mode)


def ieee_sub(x: Any, y: Any, rounding_mode: str = "rn") -> Any:
    """x - y with the given rounding (see T.ieee_add)."""
    return _ieee("sub", (x, y), rounding_mode)


def ieee_mul(x: Any, y: Any, rounding_mode: str = "rn") -> Any:
    """x * y with the given rounding (see T.ieee_add)."""
    return _ieee("mul", (x, y), rounding_mode)


def ieee_fmaf(x: Any, y: Any, z: Any, rounding_mode: str = "rn") -> Any:
    """x * y + z rounded once, as given (see T.ieee_add)."""
    return _ieee("fmaf", (x, y, z), rounding_mode)


def ieee_frcp(x: Any, rounding_mode: str = "rn") -> Any:
    """1 / x with the given rounding (see T.ieee_add)."""
    return _ieee("frcp", (x,), rounding_mode)


def ieee_fsqrt(x: Any, rounding_mode: str = "rn") -> Any:
    """sqrt(x) with the given rounding (see T.ieee_add)."""
    return _ieee("fsqrt", (x,), rounding_mode)


def ieee_frsqrt(x: Any) -> Any:
    """1 / sqrt(x) rounded to nearest (float32)."""
    return _ieee("frsqrt", (x,), "rn")


def ieee_fdiv(x: Any, y: Any, rounding_mode: str = "rn") -> Any:
    """x / y with the given rounding (see T.ieee_add)."""
    return _ieee("fdiv", (x, y), rounding_mode)
