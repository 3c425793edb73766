"""How TVM's LowerIntrin lowers math intrinsics for the `musa` target where its defaults are wrong for MUSA.

T.rsqrt: TVM's default legalization rewrites it to `1 / sqrt(x)` (a divide and a square root); MUSA has the
reciprocal square root itself (`rsqrtf` / `rsqrt`), which is what a user writing T.rsqrt expects. Half-like
operands compute in float, as the other math built-ins do.

T.round (ties to even, as torch.round): TVM lowers float32/float64 to `nearbyintf` / `nearbyint` for every target,
but leaves float16/bfloat16 to the printer, whose generic half path computes C's `roundf` (ties away from zero).
For those, TVM's CUDA rules call the half intrinsic `hrint`, which MUSA's fp16/bf16 headers copy: a scalar prints
as that. A vector of them rounds each lane in float with `nearbyintf` (`tl::vmath`; exact: a half-like value is exactly a float,
and its nearest integer is exactly a half-like value again).

Registered when the pipeline is imported.
"""

from __future__ import annotations

import tvm
from tvm import tirx


def _rsqrt(call: tirx.Call) -> tirx.PrimExpr:
    dtype = tvm.DataType(str(call.ty.dtype))
    (x,) = call.args
    if dtype.type_code == tvm.DataTypeCode.FLOAT and dtype.bits == 64:
        return tirx.call_pure_extern(str(dtype), "rsqrt", x)
    if dtype.type_code == tvm.DataTypeCode.FLOAT and dtype.bits == 32:
        return tirx.call_pure_extern(str(dtype), "rsqrtf", x)
    # float16 / bfloat16 (and their vectors): in float, narrowed back.
    wide = tvm.DataType(f"float32x{dtype.lanes}" if dtype.lanes > 1 else "float32")
    return tirx.Cast(str(dtype), tirx.call_pure_extern(str(wide), "rsqrtf", tirx.Cast(str(wide), x)))


def _round(call: tirx.Call) -> tirx.PrimExpr:
    dtype = tvm.DataType(str(call.ty.dtype))
    (x,) = call.args
    if dtype.type_code == tvm.DataTypeCode.FLOAT and dtype.bits in (32, 64):
        return tvm.ir.Op.get("tirx.round").get_attr("default.FLowerIntrinsic")(call)  # TVM's nearbyint, unchanged
    if dtype.lanes == 1:
        return tirx.call_pure_extern(str(dtype), "hrint", x)
    wide = f"float32x{dtype.lanes}"  # the printer calls tl::vmath::nearbyintf on the float lanes
    return tirx.Cast(str(dtype), tirx.nearbyint(tirx.Cast(wide, x)))


tirx.op.register_intrin_lowering("tirx.rsqrt", target="musa", f=_rsqrt, level=100)
tirx.op.register_intrin_lowering("tirx.round", target="musa", f=_round, level=100)
