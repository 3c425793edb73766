"""Warp-group (squad) completion of asynchronous SQMMA gemms, in upstream's spelling.

    T.gemm(A_shared, B_shared, C_local, wg_wait=-1)   # issue, do not wait
    T.warpgroup_commit_batch()                        # close the group of gemms issued so far
    ...                                               # independent work
    T.warpgroup_wait(0)                               # at most 0 groups still in flight: C_local is ready

On mp_31/mp_32 they are `__musa_tce_commit_group()` and `__musa_tce_wait_group(n)` (LowerWaitSqmma); where gemms
complete synchronously (mp_21/mp_22, WMMA, FMA) there is nothing to commit or wait for, and they print nothing,
as T.wait_sqmma does.
"""

from __future__ import annotations

from tvm import tirx
from tvm.tirx.script import builder as Tb

from ..ir.ops import WARPGROUP_COMMIT_OP, WARPGROUP_WAIT_OP
from .builder import kernel_trace, static_value



def warpgroup_commit_batch() -> None:
    """Close the group of asynchronous gemms (`T.gemm(..., wg_wait=-1)`) this thread issued since its last
    commit; `T.warpgroup_wait(n)` counts these groups."""
    kernel_trace("T.warpgroup_commit_batch")
    Tb.evaluate(tirx.call_intrin("int32", WARPGROUP_COMMIT_OP))


def warpgroup_wait(num_pending: int = 0) -> None:
    """Wait until at most `num_pending` (0..2) of this thread's committed gemm groups are still in flight.
    Call it before reading an accumulator of `T.gemm(..., wg_wait=-1)` or overwriting its operand tiles."""
    trace = kernel_trace("T.warpgroup_wait")
    value = static_value(num_pending)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 2:
        raise trace.error(f"T.warpgroup_wait: num_pending must be 0, 1 or 2 (a compile-time int); got {num_pending!r}")
    Tb.evaluate(tirx.call_intrin("int32", WARPGROUP_WAIT_OP, value))
