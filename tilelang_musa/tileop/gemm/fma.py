"""The FMA GEMM: C[i, j] (+)= sum_k A[i, k] * B[k, j] on every arch, each thread over its own C elements.

C's layout is whatever the rest of the kernel needs (or a plain partition if nothing does); each thread
loops over the C elements it holds, summing in fp32 (16-bit float C) or C's own type, reading A and B from shared
memory (a fragment operand is staged there first, see registry.py). It is the fallback every other path
declines to, and accepts every shape.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..loop_plan import fragment_plan, free_plan, lower_with_plan
from .registry import GemmContext, GemmImpl, thread_analyzer

SHARED_SCOPES = ("shared", "shared.dyn")


def _declines(gemm: Any, ctx: GemmContext) -> str | None:
    if gemm.A.scope not in SHARED_SCOPES or gemm.B.scope not in SHARED_SCOPES:
        return "operands in registers need a matrix instruction; FMA reads A and B from shared memory"
    return None


def _infer_layout(gemm: Any, ctx: GemmContext, layouts: dict) -> dict:
    if gemm.C.buffer in layouts:
        return {}
    return {gemm.C.buffer: free_plan([gemm.M, gemm.N], ctx.num_threads, 1).fragment}


def _lower(gemm: Any, args: Any, ctx: GemmContext) -> Any:
    M, N, K = gemm.M, gemm.N, gemm.K
    out = gemm.C.dtype
    # A 16-bit float C sums its K products in fp32 and rounds once per call, as a matrix instruction's fp32
    # accumulation does (rounding each product to fp16 would drift far from it over a long K).
    acc = "float32" if out in ("float16", "bfloat16") else out
    i, j, k = (tirx.Var(n, "int32") for n in ("i", "j", "k"))

    def operand(region, row, col, transpose):
        r, c = (col, row) if transpose else (row, col)
        index = list(region.mins)  # leading size-1 dims (e.g. a pipeline stage) keep their min
        index[-2], index[-1] = index[-2] + r, index[-1] + c
        value = region.buffer[tuple(index)]
        return value if region.dtype == acc else tirx.Cast(acc, value)

    c_index = list(gemm.C.mins)
    c_index[-2], c_index[-1] = c_index[-2] + i, c_index[-1] + j
    product = operand(gemm.A, i, k, gemm.trans_A) * operand(gemm.B, k, j, gemm.trans_B)
    if acc == out:
        update = tirx.BufferStore(gemm.C.buffer, gemm.C.buffer[tuple(c_index)] + product, c_index)
        body = tirx.For(k, 0, K, tirx.ForKind.SERIAL, update)
        if gemm.clear_accum:
            body = tirx.SeqStmt([tirx.BufferStore(gemm.C.buffer, tirx.const(0, out), c_index), body])
        allocs = []
    else:
        total = Tb.buffer((1,), acc, scope="local")
        IRBuilder.name(f"{gemm.C.name}_sum", total)
        start = tirx.const(0, acc) if gemm.clear_accum else tirx.Cast(acc, gemm.C.buffer[tuple(c_index)])
        body = tirx.SeqStmt([
            tirx.BufferStore(total, start, [0]),
            tirx.For(k, 0, K, tirx.ForKind.SERIAL, tirx.BufferStore(total, total[0] + product, [0])),
            tirx.BufferStore(gemm.C.buffer, tirx.Cast(out, total[0]), c_index)])
        allocs = [tirx.AllocBuffer(total)]
    ana = thread_analyzer(args)
    plan = fragment_plan(args.layouts[gemm.C.buffer], [M, N])
    lowered = lower_with_plan([i, j], body, plan, args.thread_var, args.num_threads, ana)
    return tirx.SeqStmt(allocs + [lowered]) if allocs else lowered


FMA = GemmImpl("FMA", _declines, _infer_layout, _lower, stages=lambda operands: True)
