"""FuseAcceleratedOps: vectorized computations that MUSA runs as one accelerated op become that op's call.

    Cast(bfloat16x4, Cast(float32x4, x: float16x4) * y: float32x4)   ->   tl::mul_half_float_to_bfloat16_x4(x, y)

(either operand order). Runs after VectorizeLoop, where `T.Cast("bfloat16", T.Cast("float32", A[i]) * B[i])` in a
4-wide vectorized loop has that shape. The op computes exactly what the expression says (one float product per
lane, rounded once to bfloat16), so the rewrite never changes results.
"""

from __future__ import annotations

import tvm_ffi
from tvm import tirx

from ..ir.ops import MUL_HALF_FLOAT_TO_BFLOAT16_X4
from .pass_base import tl_pass


def _dtype(expr) -> str:
    return str(expr.ty.dtype)


def _half_and_float(a, b):
    """(x, y) if a is Cast(float32x4, x: float16x4) and b is float32x4, else None."""
    if isinstance(a, tirx.Cast) and _dtype(a) == "float32x4" and _dtype(a.value) == "float16x4" \
            and _dtype(b) == "float32x4":
        return a.value, b
    return None


def fuse_accelerated_ops(func: tirx.PrimFunc) -> tirx.PrimFunc:
    def on_cast(node, mutator):
        node = mutator.default_mutate(node)
        if not isinstance(node, tirx.Cast) or _dtype(node) != "bfloat16x4" or not isinstance(node.value, tirx.Mul):
            return node
        mul = node.value
        operands = _half_and_float(mul.a, mul.b) or _half_and_float(mul.b, mul.a)
        if operands is None:
            return node
        return tirx.call_extern("bfloat16x4", MUL_HALF_FLOAT_TO_BFLOAT16_X4, *operands)

    body = tvm_ffi.structural_mutate(func.body, [(tirx.Cast, on_cast)])
    return func if body.same_as(func.body) else func.with_body(body)


def FuseAcceleratedOps():  # noqa: N802
    return tl_pass("FuseAcceleratedOps", fuse_accelerated_ops)
