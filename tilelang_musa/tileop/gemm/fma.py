"""The FMA GEMM: C[i, j] (+)= sum_k A[i, k] * B[k, j] on every arch, as a T.Parallel nest over C.

The nest runs where C's elements live (layout inference places it with C), each thread accumulating its own
elements in fp32/int32 registers; A and B are read from shared memory. It is the fallback every other path
declines to, and accepts every shape.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from ..parallel import parallel_nest
from .registry import GemmImpl

SHARED_SCOPES = ("shared", "shared.dyn")


def _declines(gemm: Any, target: Any, configs: dict) -> str | None:
    if gemm.A.scope not in SHARED_SCOPES or gemm.B.scope not in SHARED_SCOPES:
        return "operands in registers need a matrix instruction; FMA reads A and B from shared memory"
    return None


def _lower(gemm: Any, args: Any) -> Any:
    M, N, K = gemm.M, gemm.N, gemm.K
    acc = gemm.C.dtype
    k = tirx.Var("k", "int32")

    def operand(region, row, col, transpose):
        r, c = (col, row) if transpose else (row, col)
        index = list(region.mins)  # leading size-1 dims (e.g. a pipeline stage) keep their min
        index[-2], index[-1] = index[-2] + r, index[-1] + c
        value = region.buffer[tuple(index)]
        return value if region.dtype == acc else tirx.Cast(acc, value)

    def body(idx):
        i, j = idx
        c_index = list(gemm.C.mins)
        c_index[-2], c_index[-1] = c_index[-2] + i, c_index[-1] + j
        product = operand(gemm.A, i, k, gemm.trans_A) * operand(gemm.B, k, j, gemm.trans_B)
        update = tirx.BufferStore(gemm.C.buffer, gemm.C.buffer[tuple(c_index)] + product, c_index)
        loop = tirx.For(k, 0, K, tirx.ForKind.SERIAL, update)
        if gemm.clear_accum:
            return tirx.SeqStmt([tirx.BufferStore(gemm.C.buffer, tirx.const(0, acc), c_index), loop])
        return loop

    return parallel_nest([M, N], body, gemm.loc)


FMA = GemmImpl("FMA", _declines, _lower)
