"""LowerWaitSqmma: `T.wait_sqmma(n)` becomes `tl::sqmma_wait<n>()` where SQMMA exists (mp_31/mp_32), and
`T.warpgroup_commit_batch()` / `T.warpgroup_wait(n)` the built-ins `__musa_tce_commit_group()` /
`__musa_tce_wait_group(n)`.

Elsewhere every gemm completes synchronously, so the waits and commits have nothing to do and are dropped."""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.ops import WAIT_SQMMA_OP, WARPGROUP_COMMIT_OP, WARPGROUP_WAIT_OP
from ..target import arch_of
from .pass_base import tl_pass


def lower_wait_sqmma(func: tirx.PrimFunc) -> tirx.PrimFunc:
    target = func.attrs["target"] if func.attrs is not None and "target" in func.attrs else None
    has_sqmma = target is not None and arch_of(target).has_sqmma

    def on_evaluate(node, mutator):
        call = node.value
        if not (isinstance(call, tvm.ir.Call) and isinstance(call.op, tvm.ir.Op)):
            return node
        name = str(call.op.name)
        if name not in (WAIT_SQMMA_OP, WARPGROUP_COMMIT_OP, WARPGROUP_WAIT_OP):
            return node
        if not has_sqmma:
            return tirx.Evaluate(tirx.const(0, "int32"))
        if name == WAIT_SQMMA_OP:
            return tirx.Evaluate(tirx.call_extern("int32", f"tl::sqmma_wait<{int(call.args[0].value)}>"))
        if name == WARPGROUP_COMMIT_OP:
            return tirx.Evaluate(tirx.call_extern("int32", "__musa_tce_commit_group"))
        return tirx.Evaluate(tirx.call_extern("int32", "__musa_tce_wait_group", call.args[0]))

    return tvm_ffi.structural_mutate(func, [(tirx.Evaluate, on_evaluate)])


def LowerWaitSqmma():  # noqa: N802
    return tl_pass("LowerWaitSqmma", lower_wait_sqmma)
