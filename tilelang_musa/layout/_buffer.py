"""Shape and dtype of the buffer-like values layout constructors accept (a buffer Var, a region or an
element access of one, or an explicit `(shape, dtype)` pair)."""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from ._expr import const_int


def buffer_shape_dtype(buffer: Any, what: str) -> tuple[list[Any], str]:
    """(shape, dtype) of a buffer Var, a TensorRegion/TensorLoad of one, or a `(shape, dtype)` tuple."""
    if isinstance(buffer, tuple) and len(buffer) == 2 and isinstance(buffer[1], str):
        shape, dtype = buffer
        return [shape] if isinstance(shape, int) else list(shape), dtype
    source = buffer
    if isinstance(buffer, (tvm.ir.expr.TensorLoad, tvm.ir.expr.TensorRegion)):
        source = buffer.source
    if isinstance(source, tvm.ir.expr.Var) and isinstance(source.ty, tirx.BufferType):
        shape = [const_int(e) if const_int(e) is not None else e for e in source.ty.shape]
        return shape, str(source.ty.dtype.dtype)
    raise TypeError(f"{what}: expected a buffer (or a region of one, or a (shape, dtype) pair), "
                    f"got {type(buffer).__name__}: {buffer!r}")


def dtype_bits(dtype: str) -> int:
    dt = tvm.runtime.DataType(str(dtype))
    return dt.bits * dt.lanes
