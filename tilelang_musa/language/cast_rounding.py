"""`T.cast(x, dtype, round=, sat=, rbits=)`: upstream's conversion with a chosen rounding and saturation.

`round` is "rn" (to nearest, ties to even), "rz" (toward zero), "rp" (toward +infinity), "rm" (toward -infinity) or
"rs" (stochastic: `rbits`, an integer expression whose low 32 bits are random, decides); "" is the default
conversion. `sat=True` (satfinite) clamps a result beyond the target's largest finite value, infinity included, to
that value; `sat=False` overflows as IEEE does (infinity, or NaN for float8_e4m3fn, which has none; a rounding
toward zero keeps the largest finite value). NaN stays NaN. Without `round`, an explicit `sat` is "rn" with that
saturation, and a plain `T.cast(x, dtype)` is the default conversion, unchanged.

Targets are float16, bfloat16, float8_e4m3fn and float8_e5m2, from float32, float16 or bfloat16 (a 16-bit source
is widened to float32 first, exactly). The conversion is portable MUSA C (tl_templates/musa/cast_rounding.h),
bit for bit the same on every architecture: no MUSA conversion instruction with these modes is documented. For
"rs", the result rounds up when the dropped part, as a 32-bit fraction of the target's step, plus rbits carries
out of 32 bits; so each element rounds up with probability equal to that fraction when rbits is uniform. This is
not PTX's assignment of random bits to lanes: an element uses the rbits it is given, so pass one per element for
independent roundings.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from .builder import as_expr, operand_error, operand_type_error

VALID_ROUNDING_MODES = ("", "rn", "rz", "rp", "rm", "rs")
_MODE_ENUM = {"rn": "kNearestEven", "rz": "kTowardZero", "rp": "kUp", "rm": "kDown"}
# Target dtype -> its C type in the device templates.
_TARGET_TYPES = {"float16": "half_t", "bfloat16": "bfloat16_t", "float8_e4m3fn": "tl::fp8_e4_t",
                 "float8_e5m2": "tl::fp8_e5_t"}
_SOURCES = ("float32", "float16", "bfloat16")


def check_rounding_arguments(round: str, sat: Any, rbits: Any) -> None:  # noqa: A002 - upstream's keyword
    """Upstream's checks of the keywords, in its words (a ValueError each)."""
    if not isinstance(round, str) or round not in VALID_ROUNDING_MODES:
        raise operand_error("T.cast", f"T.cast: Invalid round {round!r}. Must be one of: "
                                      f"{sorted(VALID_ROUNDING_MODES)}")
    if sat is not None and not isinstance(sat, bool):
        raise operand_error("T.cast", f"T.cast: Invalid sat {sat!r}. Must be a bool (True for satfinite, False for "
                                      "no saturation)")
    if round == "rs" and rbits is None:
        raise operand_error("T.cast", "T.cast: rbits is required when round='rs' (stochastic rounding)")
    if round != "rs" and rbits is not None:
        raise operand_error("T.cast", "T.cast: rbits is only valid with round='rs' (stochastic rounding)")


def _dtype_of(expr: Any) -> str:
    return str(expr.ty.dtype) if isinstance(expr, tvm.ir.Expr) else ""


def rounded_cast(value: Any, dtype: str, round: str, sat: bool | None, rbits: Any) -> Any:  # noqa: A002
    """The call of `tl::convert_rounded` / `tl::convert_stochastic` converting `value` to `dtype` (canonical)."""
    check_rounding_arguments(round, sat, rbits)
    if dtype not in _TARGET_TYPES:
        raise operand_type_error("T.cast", f"T.cast(..., round=, sat=, rbits=) converts to {', '.join(_TARGET_TYPES)}; "
                                           f"got {dtype} (a plain T.cast(x, {dtype!r}) converts to it)")
    value = as_expr(value)
    if not isinstance(value, tvm.ir.Expr):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise operand_type_error("T.cast", f"T.cast: cannot convert {value!r} to {dtype}")
        value = tirx.const(float(value), "float32")
    source = _dtype_of(value)
    if tvm.DataType(source).lanes != 1 or source.split("x")[0] not in _SOURCES:
        raise operand_type_error("T.cast", f"T.cast(..., round=, sat=, rbits=) converts a scalar float32, float16 or "
                                           f"bfloat16; got {source}")
    if source != "float32":
        value = tirx.Cast("float32", value)  # exact: every 16-bit float is a float32
    saturate = "true" if sat is None or sat else "false"
    if round != "rs":
        mode = _MODE_ENUM[round or "rn"]
        return tirx.call_pure_extern(dtype, f"tl::convert_rounded<{_TARGET_TYPES[dtype]}, tl::Rounding::{mode}, "
                                       f"{saturate}>", value)
    rbits = as_expr(rbits)
    if isinstance(rbits, int) and not isinstance(rbits, bool):
        rbits = tirx.const(rbits & 0xFFFFFFFF, "uint32")
    rbits_dtype = tvm.DataType(_dtype_of(rbits)) if isinstance(rbits, tvm.ir.Expr) else None
    if rbits_dtype is None or rbits_dtype.lanes != 1 or rbits_dtype.type_code not in (tvm.DataTypeCode.INT,
                                                                                       tvm.DataTypeCode.UINT):
        raise operand_type_error("T.cast", f"T.cast(round='rs'): rbits must be a scalar integer; got {rbits!r}")
    if str(rbits_dtype) != "uint32":
        rbits = tirx.Cast("uint32", rbits)  # its low 32 bits
    return tirx.call_pure_extern(dtype, f"tl::convert_stochastic<{_TARGET_TYPES[dtype]}, {saturate}>", value, rbits)
