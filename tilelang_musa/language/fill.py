"""`T.fill` and `T.clear`."""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from ..tileop import Fill, emit_tile_op
from ..tileop.region import to_region
from .builder import kernel_trace


def fill(dst: Any, value: Any) -> None:
    """Set every element of `dst` (a buffer or region, any scope) to `value`, cast to dst's dtype.
    Example: T.fill(acc, 0)"""
    kernel_trace("T.fill")
    region, _ = to_region(dst, "T.fill", "dst")
    if not isinstance(value, tvm.ir.Expr):
        value = tirx.const(value, region.dtype)
    emit_tile_op(Fill.op_name, [region.to_ir(), value], {})


def clear(dst: Any) -> None:
    """`T.fill(dst, 0)`."""
    fill(dst, 0)
