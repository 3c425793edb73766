"""MUSA accelerated ops (the TileLang-MUSA user's guide): computations the target runs as one fused operation.

`T.mul_half_float_to_bfloat16_x4(x, y)`: bfloat16x4(float(x) * y) for x float16x4 and y float32x4, each lane
rounded once to nearest even. Written with 4-element slices (`A[i:i + 4]`) or any 4-lane vector expressions. The
compiler also recognises the same computation spelled `T.Cast("bfloat16", T.Cast("float32", a) * b)` once it is
vectorized four lanes wide (transform/fuse_accelerated_ops.py).
"""

from __future__ import annotations

from typing import Any

from tvm import tirx

from ..ir.ops import MUL_HALF_FLOAT_TO_BFLOAT16_X4
from ..tileop.region import TensorRegion
from .builder import as_expr, current_trace
from .runtime import vector_indices


def _vector(trace, construct: str, what: str, value: Any, dtype: str) -> Any:
    if isinstance(value, TensorRegion):  # A[i:i + 4]: a 4-lane load
        mins = [r.min for r in value.region]
        extents = [r.extent for r in value.region]
        indices = [m if not (isinstance(e, tirx.IntImm) and int(e.value) != 1) else slice(m, m + e)
                   for m, e in zip(mins, extents)]
        ramp = vector_indices(trace, value.source, indices, 4) if any(isinstance(i, slice) for i in indices) else None
        if ramp is None:
            raise trace.error(f"{construct}: {what} must be 4 consecutive elements (`A[i:i + 4]`); got "
                              f"{value.source.name} with extents {[str(e) for e in extents]}")
        value = value.source[tuple(ramp)]
    value = as_expr(value)
    got = str(value.ty.dtype) if hasattr(value, "ty") and hasattr(value.ty, "dtype") else type(value).__name__
    if got != dtype:
        raise trace.error(f"{construct}: {what} must be {dtype}; got {got}")
    return value


def mul_half_float_to_bfloat16_x4(x: Any, y: Any) -> Any:
    """bfloat16x4(float(x) * y): x float16x4, y float32x4 (see the module docstring)."""
    construct = "T.mul_half_float_to_bfloat16_x4"
    trace = current_trace(construct)
    lhs = _vector(trace, construct, "lhs", x, "float16x4")
    rhs = _vector(trace, construct, "rhs", y, "float32x4")
    return tirx.call_extern("bfloat16x4", MUL_HALF_FLOAT_TO_BFLOAT16_X4, lhs, rhs)
