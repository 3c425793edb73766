"""Data types of the language: `T.float16`, `T.int32`, ... are dtype strings that also build values.

`T.float32` can be passed wherever a dtype string is expected (it *is* the string "float32"), used as a
parameter annotation, and called: `T.float32(1)` is a constant, `T.float32(expr)` a cast.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

# float6/float4 arithmetic types are not supported on MUSA (the user's guide): they are rejected by name.
UNSUPPORTED_DTYPES = ("float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn")

_ALIASES = {"float": "float32", "half": "float16", "double": "float64", "int": "int32", "bf16": "bfloat16"}


def canonical_dtype(dtype: Any) -> str:
    """The canonical TVM dtype string of `dtype` (a string, a DType, a torch dtype or a tvm dtype)."""
    if isinstance(dtype, DType):
        return str.__str__(dtype)
    text = str(dtype)
    if text.startswith("torch."):
        text = text[len("torch."):]
    text = _ALIASES.get(text, text)
    if text in UNSUPPORTED_DTYPES:
        from ..errors import UnsupportedError

        raise UnsupportedError(f"dtype `{text}` is not supported by TileLang-MUSA (no float6/float4 arithmetic)")
    try:
        tvm.runtime.DataType(text)
    except Exception:  # noqa: BLE001 - tvm raises a generic error for unknown names
        from ..errors import CompileError

        raise CompileError(f"unknown dtype `{dtype}`") from None
    return text


class DType(str):
    """A dtype string that is also a constructor of constants and casts. `T.dtype("half")`, `T.dtype(torch.half)`
    and `T.float16` are equal (to each other, to "float16" and to torch.float16); `.as_torch()` is the torch dtype."""

    def __new__(cls, value: Any) -> "DType":
        return str.__new__(cls, canonical_dtype(value))

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, str) or type(other).__module__ == "torch":
            try:
                return str.__eq__(self, canonical_dtype(other))
            except Exception:  # noqa: BLE001 - not a dtype at all: unequal
                return False
        return NotImplemented

    def __ne__(self, other: Any) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = str.__hash__

    def as_torch(self) -> Any:
        import torch

        name = str.__str__(self)
        found = getattr(torch, name, None)
        if not isinstance(found, torch.dtype):
            raise TypeError(f"T.{name} has no torch dtype")
        return found

    def __call__(self, value: Any = None) -> Any:
        dtype = str.__str__(self)
        if value is None:  # `v = T.int32()`: a fresh variable, bound later (T.let) or used as a size
            from .builder import take_name

            return tirx.Var(take_name("v"), dtype)
        if isinstance(value, tvm.ir.Expr):
            return tirx.Cast(dtype, value)
        return tirx.const(value, dtype)

    def __repr__(self) -> str:
        return f"T.{str.__str__(self)}"



dtype = DType  # T.dtype("float16"), as upstream
float16 = DType("float16")
bfloat16 = DType("bfloat16")
float32 = DType("float32")
float64 = DType("float64")
int8 = DType("int8")
int16 = DType("int16")
int32 = DType("int32")
int64 = DType("int64")
uint8 = DType("uint8")
uint16 = DType("uint16")
uint32 = DType("uint32")
uint64 = DType("uint64")
boolean = DType("bool")
float8_e4m3 = DType("float8_e4m3fn")
float8_e4m3fn = DType("float8_e4m3fn")
float8_e5m2 = DType("float8_e5m2")
float8_e8m0fnu = DType("float8_e8m0fnu")
float = DType("float32")  # noqa: A001 - upstream's T.float, T.half, T.int, T.double aliases
half = DType("float16")
int = DType("int32")  # noqa: A001
double = DType("float64")

# Vector types, `T.float32x4` and so on: the lane counts of upstream's table.
VECTOR_DTYPES = {
    f"{base}x{lanes}": DType(f"{base}x{lanes}")
    for base in ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
                 "uint32", "uint64", "float8_e4m3fn", "float8_e5m2")
    for lanes in (2, 4, 8, 16, 32, 64)
}
globals().update(VECTOR_DTYPES)

__all__ = [
    "DType", "canonical_dtype", "float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64", "boolean", "float8_e4m3", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "dtype", "float",
    "half", "int", "double", *VECTOR_DTYPES,
]
