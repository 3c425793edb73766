"""`T.fill` and `T.clear`."""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from ..tileop import Fill, emit_tile_op
from ..tileop.region import to_region
from .builder import kernel_trace
from .reducer_epoch import note_legacy_access


def fill(dst: Any, value: Any) -> None:
    """Set every element of `dst` (a buffer or region, any scope) to `value`, cast to dst's dtype.
    Example: T.fill(acc, 0)"""
    trace = kernel_trace("T.fill")
    region, _ = to_region(dst, "T.fill", "dst")
    written = value if isinstance(value, int | float) else str(value)  # as the user wrote it, for messages
    if not isinstance(value, tvm.ir.Expr):
        value = tirx.const(value, region.dtype)
    note_legacy_access(trace, region.buffer, "T.fill / T.clear", store=True)
    kind = trace.reducers.get(region.buffer)
    if kind in ("sum", "bitxor") and not (isinstance(value, tirx.IntImm | tirx.FloatImm) and value.value == 0):
        # every thread's partial would hold the value: T.finalize_reducer would count it once per thread
        raise trace.error(f"T.fill: `{region.buffer.name}` is a {kind} reducer; fill it with 0 and pass {written} "
                          f"as the seed instead: T.reducer_init({region.buffer.name}, {written})")
    emit_tile_op(Fill.op_name, [region.to_ir(), value], {})


def clear(dst: Any) -> None:
    """`T.fill(dst, 0)`."""
    fill(dst, 0)
