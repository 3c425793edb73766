"""Atomic read-modify-write: `T.atomic_add`, `T.atomic_max`, `T.atomic_min`."""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.tirx.script import builder as Tb

from ..tileop import emit_tile_op
from ..tileop.atomic import Atomic, element_atomic
from ..tileop.region import TensorLoad, pair_dims, to_region
from .builder import current_trace


def _atomic(kind: str, dst: Any, value: Any, return_prev: bool) -> Any:
    construct = f"T.atomic_{kind}"
    trace = current_trace(construct)
    if trace.kernel is None:
        raise trace.error(f"`{construct}` must be used inside `with T.Kernel(...)`")
    if isinstance(dst, TensorLoad):  # one element
        if isinstance(value, (int, float)):
            value = tirx.const(value, str(dst.ty.dtype))
        call = element_atomic(kind, dst, value, return_prev)
        if return_prev:
            return call
        Tb.evaluate(call)
        return None
    if return_prev:
        raise trace.error(f"{construct}(return_prev=True) needs a single element as the destination")
    region, _ = to_region(dst, construct, "dst")
    if region.scope not in ("global", "shared", "shared.dyn"):
        raise trace.error(f"{construct}: the destination must be in global or shared memory; "
                          f"`{region.name}` is {region.scope}")
    if isinstance(value, tvm.ir.Expr) and not isinstance(value.ty, tvm.ir.PrimType) or not isinstance(
            value, (int, float, tvm.ir.Expr)):
        src, _ = to_region(value, construct, "value")
        if pair_dims(region, src) is None:
            raise trace.error(f"{construct}: value {src.describe()} and dst {region.describe()} differ in shape")
        value_arg = src.to_ir()
    else:
        value_arg = value if isinstance(value, tvm.ir.Expr) else tirx.const(value, region.dtype)
    emit_tile_op(Atomic.op_name, [region.to_ir(), value_arg], {"kind": kind})
    return None


def atomic_add(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False) -> Any:
    """dst += value atomically (an element, or a region with a same-shaped region or a scalar value)."""
    return _atomic("add", dst, value, return_prev)


def atomic_max(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False) -> Any:
    """dst = max(dst, value) atomically."""
    return _atomic("max", dst, value, return_prev)


def atomic_min(dst: Any, value: Any, memory_order: str | None = None, return_prev: bool = False) -> Any:
    """dst = min(dst, value) atomically."""
    return _atomic("min", dst, value, return_prev)
