"""The FMA GEMM: C[i, j] (+)= sum_k A[i, k] * B[k, j] on every arch, each thread over its own C elements.

C's layout is whatever the rest of the kernel needs (or a plain partition if nothing does), so a gemm sharing its
accumulator with one on a matrix instruction can always follow that one's layout; each thread
loops over the C elements it holds, accumulating in C's own type one k at a time, reading A and B from shared
memory (a fragment operand is staged there first, see registry.py). It is the fallback every other path
declines to, and accepts every shape.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx

from ..loop_plan import fragment_plan, free_plan, lower_with_plan
from .registry import GemmContext, GemmImpl, choose_implementation, group_of, thread_analyzer

SHARED_SCOPES = ("shared", "shared.dyn")


def _declines(gemm: Any, ctx: GemmContext) -> str | None:
    if gemm.A.scope not in SHARED_SCOPES or gemm.B.scope not in SHARED_SCOPES:
        return "operands in registers need a matrix instruction; FMA reads A and B from shared memory"
    return None


def _infer_layout(gemm: Any, ctx: GemmContext, layouts: dict) -> dict:
    if gemm.C.buffer in layouts:
        return {}
    # C shared with a gemm on a matrix path: that path places it, and this one computes into its layout
    if any(not choose_implementation(member, ctx)[0].adapts_accumulator for member in group_of(gemm, ctx)):
        return {}
    return {gemm.C.buffer: free_plan([gemm.M, gemm.N], ctx.num_threads, 1).fragment}


def _lower(gemm: Any, args: Any, ctx: GemmContext) -> Any:
    M, N, K = gemm.M, gemm.N, gemm.K
    out = gemm.C.dtype
    # Every k step rounds into C's own type, as the card's FMA path does (MUSA has no matrix instruction with a
    # 16-bit accumulator, so such a T.gemm always comes here). A 16-bit float step is one fused multiply-add:
    # the fp32 product of two 16-bit floats is exact, the sum is rounded once, to C's type.
    wide = "float32" if out in ("float16", "bfloat16") else out
    i, j, k = (tirx.Var(n, "int32") for n in ("i", "j", "k"))

    def widen(value, dtype):
        return value if dtype == wide else tirx.Cast(wide, value)

    def operand(region, row, col, transpose):
        r, c = (col, row) if transpose else (row, col)
        index = list(region.mins)  # leading size-1 dims (e.g. a pipeline stage) keep their min
        index[-2], index[-1] = index[-2] + r, index[-1] + c
        return widen(region.buffer[tuple(index)], region.dtype)

    c_index = list(gemm.C.mins)
    c_index[-2], c_index[-1] = c_index[-2] + i, c_index[-1] + j
    product = operand(gemm.A, i, k, gemm.trans_A) * operand(gemm.B, k, j, gemm.trans_B)
    total = widen(gemm.C.buffer[tuple(c_index)], out) + product
    update = tirx.BufferStore(gemm.C.buffer, total if wide == out else tirx.Cast(out, total), c_index)
    body = tirx.For(k, 0, K, tirx.ForKind.SERIAL, update)
    if gemm.clear_accum:
        body = tirx.SeqStmt([tirx.BufferStore(gemm.C.buffer, tirx.const(0, out), c_index), body])
    ana = thread_analyzer(args)
    plan = fragment_plan(args.layouts[gemm.C.buffer], [M, N])
    return lower_with_plan([i, j], body, plan, args.thread_var, args.num_threads, ana)


FMA = GemmImpl("FMA", _declines, _infer_layout, _lower, stages=lambda operands: True, adapts_accumulator=True)
