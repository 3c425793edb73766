"""`T.dp4a(A[i], B[j], C[k])`: C[k] += the dot product of the four int8 elements from A[i] and from B[j] (along
the last dimension), in int32 (upstream's DP4A builtin, as plain integer arithmetic: mcc picks the instruction)."""

from __future__ import annotations

from typing import Any

from tvm import tirx

from ..tileop.region import TensorLoad
from .builder import current_trace, is_buffer
from .runtime import store


def _element(trace, what: str, value: Any, dtype: str, role: str) -> Any:
    """The element `value` names: an element load as given, a whole buffer its first element (as upstream, which
    passes a pointer to where the four values start)."""
    if is_buffer(value):
        value = tirx.BufferLoad(value, [tirx.const(0, "int32")] * len(value.ty.shape))
    if not isinstance(value, TensorLoad):
        raise trace.error(f"T.dp4a: {what} must be a buffer or an element of one (`A_local[k * 4]`); got {value!r}")
    if str(value.ty.dtype) != dtype:
        raise trace.error(f"T.dp4a requires {role}, got {what}.dtype='{value.ty.dtype}'")
    return value


def _four(value: Any) -> list:
    *outer, last = list(value.indices)
    return [tirx.BufferLoad(value.source, outer + [last + k]) for k in range(4)]


def dp4a(A: Any, B: Any, C: Any) -> None:
    """C[k] += sum over four lanes of int32(A[i + lane]) * int32(B[j + lane]); A and B int8 (signed), C int32.
    Each of A, B, C is an element (`A_local[k * 4]`) or a buffer (its first element). Example: T.dp4a(A[0], B[0], C[0])"""
    trace = current_trace("T.dp4a")
    a = _four(_element(trace, "A", A, "int8", "int8 inputs"))
    b = _four(_element(trace, "B", B, "int8", "int8 inputs"))
    C = _element(trace, "C", C, "int32", "an int32 accumulator")
    total = C
    for x, y in zip(a, b):
        total = total + tirx.Cast("int32", x) * tirx.Cast("int32", y)
    store(C.source, tuple(C.indices), total)
