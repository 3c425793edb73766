"""`T.gemm`: C (+)= op(A) @ op(B) on a block's tiles, lowered per arch (SQMMA / WMMA / MMA / FMA)."""

from __future__ import annotations

from typing import Any

import tvm
from tvm.tirx.script import builder as Tb

from ..layout import GemmWarpPolicy
from ..tileop import emit_tile_op
from ..tileop.gemm import Gemm
from ..tileop.region import to_region
from .builder import as_expr, kernel_trace, static_value


def gemm(A: Any, B: Any, C: Any, transpose_A: bool = False, transpose_B: bool = False,  # noqa: N803
         policy: GemmWarpPolicy = GemmWarpPolicy.Square, clear_accum: bool = False, k_pack: int = 1,
         wg_wait: int = 0) -> None:
    """C (+)= op(A) @ op(B): A (M, K) [(K, M) if transpose_A] and B (K, N) [(N, K) if transpose_B] in shared
    memory or fragments, C an (M, N) fragment in the accumulation dtype; `clear_accum=True` overwrites C, and so
    does a run-time condition where it holds (`clear_accum=(k == 0)` in the K loop: the first step overwrites).
    `policy` splits the block's warps over the M x N tile (Square, FullRow: all along M, FullCol)."""
    trace = kernel_trace("T.gemm")
    regions = [to_region(x, "T.gemm", what)[0] for x, what in ((A, "A"), (B, "B"), (C, "C"))]
    clear_accum = _clear_accum(trace, clear_accum, C)
    attrs = {"trans_A": bool(transpose_A), "trans_B": bool(transpose_B), "policy": int(policy),
             "clear_accum": bool(clear_accum), "k_pack": int(k_pack), "wg_wait": int(wg_wait)}
    op = Gemm(*regions, bool(transpose_A), bool(transpose_B), int(policy), bool(clear_accum), int(k_pack),
              int(wg_wait), trace.loc)
    op.validate()  # shapes and scopes are checked at the user's line
    emit_tile_op(Gemm.op_name, [r.to_ir() for r in regions], attrs)


def _clear_accum(trace: Any, clear_accum: Any, C: Any) -> bool:  # noqa: N803
    """`clear_accum` as a constant. A run-time condition (upstream takes `clear_accum=(k == 0)`) clears C under
    it before the gemm, which then accumulates: the same result. Python's `bool()` of such an IR comparison is
    False (it compares the two sides as objects), which silently accumulated into C's old contents."""
    value = static_value(clear_accum)
    if value is not None:
        return bool(value)
    cond = as_expr(clear_accum)
    if not isinstance(cond, tvm.tirx.PrimExpr) or cond.dtype.lanes != 1:
        if isinstance(cond, tvm.ir.Expr):
            raise trace.error(f"T.gemm: clear_accum must be a bool or a scalar condition; got `{cond}`")
        return bool(cond)
    if not cond.dtype.is_bool:
        cond = cond != 0
    from .fill import clear

    with Tb.If(cond):
        with Tb.Then():
            clear(C)
    return False


def wgmma_gemm(A: Any, B: Any, C: Any, transpose_A: bool = False, transpose_B: bool = False,  # noqa: N803
               policy: GemmWarpPolicy = GemmWarpPolicy.Square, clear_accum: bool = False) -> None:
    """Upstream's explicit asynchronous GEMM (Hopper WGMMA, never followed by an implicit wait): here
    `T.gemm(..., wg_wait=-1)`. On mp_31 it issues SQMMA without waiting; call `T.wait_wgmma(n)` (or
    `T.warpgroup_wait(n)`) before reading C or overwriting A / B. Paths that are synchronous anyway (WMMA, mp_22's
    warp MMA, FMA) have nothing to wait for.
    Example: T.wgmma_gemm(Q_s, K_s, S_f, transpose_B=True); T.wait_wgmma(0)"""
    gemm(A, B, C, transpose_A, transpose_B, policy, clear_accum, wg_wait=-1)


wgmma_mma = wgmma_gemm  # upstream's other spelling (tilelang.cuda.language)
