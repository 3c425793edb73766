"""`T.dp4a(A[i], B[j], C[k])`: C[k] += the dot product of the four int8 elements from A[i] and from B[j] (along
the last dimension), in int32 (upstream's DP4A builtin, as plain integer arithmetic: mcc picks the instruction)."""

from __future__ import annotations

from typing import Any

from tvm import tirx

from ..tileop.region import TensorLoad
from .builder import kernel_trace
from .runtime import store


def _four(trace, what: str, value: Any, dtype: str) -> list:
    if not isinstance(value, TensorLoad) or str(value.ty.dtype) != dtype:
        raise trace.error(f"T.dp4a: {what} must be an element of a {dtype} buffer (`A_local[k * 4]`); got {value!r}")
    *outer, last = list(value.indices)
    return [tirx.BufferLoad(value.source, outer + [last + k]) for k in range(4)]


def dp4a(A: Any, B: Any, C: Any) -> None:
    trace = kernel_trace("T.dp4a")
    a, b = _four(trace, "A", A, "int8"), _four(trace, "B", B, "int8")
    if not isinstance(C, TensorLoad) or str(C.ty.dtype) != "int32":
        raise trace.error(f"T.dp4a: C must be an element of an int32 buffer (the accumulator); got {C!r}")
    total = C
    for x, y in zip(a, b):
        total = total + tirx.Cast("int32", x) * tirx.Cast("int32", y)
    store(C.source, tuple(C.indices), total)
