"""Shared pieces of the TIR decoders: an expression's dtype, constants and integer casts, and the extraction of
one `nbit`-wide field from a packed word."""

from __future__ import annotations

from typing import Any

from tvm import tirx


def dtype_of(expr: Any) -> str:
    """The element dtype of a TIR expression (0.27 expressions carry it on `.ty`)."""
    return str(expr.ty.dtype)


def const(value: int, dtype: str) -> Any:
    return tirx.const(value, dtype)


def as_dtype(value: Any, dtype: str) -> Any:
    """`value` (a Python int or an expression) as an expression of `dtype`."""
    if isinstance(value, int):
        return tirx.const(value, dtype)
    return value if dtype_of(value) == dtype else tirx.Cast(dtype, value)


def field(val: Any, pos: Any, nbit: int, dtype: str) -> Any:
    """Bits [pos * nbit, pos * nbit + nbit) of `val`, zero-extended, computed in the unsigned-or-signed integer
    `dtype` (the mask drops what an arithmetic shift of a signed word brings in)."""
    word = as_dtype(val, dtype)
    shift = as_dtype(pos, dtype) * const(nbit, dtype)
    return (word >> shift) & const((1 << nbit) - 1, dtype)


def check_dtype(what: str, expr: Any, expected: str) -> None:
    if dtype_of(expr) != expected:
        raise TypeError(f"tilelang.quantize.{what}: the packed value must be {expected}, got {dtype_of(expr)}")
