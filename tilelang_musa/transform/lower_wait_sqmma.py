"""LowerWaitSqmma: `T.wait_sqmma(n)` becomes `tl::sqmma_wait<n>()` where SQMMA exists (mp_31/mp_32).

Elsewhere every gemm completes synchronously, so the wait has nothing to wait for and is dropped."""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from ..language.builtin import WAIT_SQMMA_OP
from ..target import arch_of
from .pass_base import tl_pass


def lower_wait_sqmma(func: tirx.PrimFunc) -> tirx.PrimFunc:
    target = func.attrs["target"] if func.attrs is not None and "target" in func.attrs else None
    has_sqmma = target is not None and arch_of(target).has_sqmma

    def on_evaluate(node, mutator):
        call = node.value
        if isinstance(call, tvm.ir.Call) and isinstance(call.op, tvm.ir.Op) and str(call.op.name) == WAIT_SQMMA_OP:
            if not has_sqmma:
                return tirx.Evaluate(tirx.const(0, "int32"))
            return tirx.Evaluate(tirx.call_extern("int32", f"tl::sqmma_wait<{int(call.args[0].value)}>"))
        return node

    return tvm_ffi.structural_mutate(func, [(tirx.Evaluate, on_evaluate)])


def LowerWaitSqmma():  # noqa: N802
    return tl_pass("LowerWaitSqmma", lower_wait_sqmma)
