"""Asynchronous barriers (mp_31): `T.alloc_barrier`, arrive / wait / expect-transaction, in upstream's spellings.

`T.alloc_barrier(arrive_count | [counts])` is a buffer of scope "shared.barrier" (uint64, one element per
barrier), whose arrive counts (in threads) ride on its allocation. `b` alone means `b[0]`. Every op below takes
an element of such a buffer and is a `tl.barrier_*` call; transform/lower_async_barriers.py numbers the barriers
(MUSA barriers are integer ids, not memory) and the printer emits the `__musa_async_*` built-ins
(docs/ASYNC_MODEL.md). Each op returns its call, as upstream: a bare statement `T.barrier_arrive(b)` is
evaluated, and so is `T.evaluate(T.ptx_arrive_barrier(b))`.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..ir.attrs import ARRIVE_COUNTS, BARRIER_SCOPE
from ..ir.ops import BARRIER_ARRIVE_EXPECT_TX_OP, BARRIER_ARRIVE_OP, BARRIER_EXPECT_TX_OP, BARRIER_WAIT_OP
from .builder import as_expr, is_buffer, kernel_trace, take_name, value


def is_barrier_buffer(buffer: Any) -> bool:
    return is_buffer(buffer) and str(buffer.ty.storage_scope) == BARRIER_SCOPE


def alloc_barrier(arrive_count: Any) -> Any:
    """`b = T.alloc_barrier(128)`: one asynchronous barrier that completes a phase when 128 threads (their warps)
    arrived; `T.alloc_barrier([128, 32])`: several, `b[0]`, `b[1]`. Allocate barriers at the top of the kernel
    (not inside a loop or branch). mp_31 and later only."""
    trace = kernel_trace("T.alloc_barrier")
    counts = list(arrive_count) if isinstance(arrive_count, (list, tuple)) else [arrive_count]
    if not counts or not all(isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in counts):
        raise trace.error(f"T.alloc_barrier: arrive_count={arrive_count!r} must be a positive int (threads) or a "
                          "non-empty list of them")
    annotations = {ARRIVE_COUNTS: [tirx.const(c, "int32") for c in counts]}
    if trace.loc is not None:
        annotations["tl.loc"] = str(trace.loc)
    buf = Tb.alloc_buffer([len(counts)], "uint64", scope=BARRIER_SCOPE, annotations=annotations)
    IRBuilder.name(take_name("barrier"), buf)
    return buf


def _barrier(construct: str, trace: Any, barrier: Any) -> Any:
    """The barrier element an op acts on: `b` (its first barrier) or `b[i]`."""
    if is_barrier_buffer(barrier):
        return barrier[0]
    if isinstance(barrier, tvm.ir.expr.TensorLoad) and is_barrier_buffer(barrier.source):
        return barrier
    raise trace.error(f"{construct}: the barrier must be a T.alloc_barrier buffer or one of its elements (b[i]); "
                      f"got {barrier!r}")


def _int_operand(construct: str, trace: Any, name: str, operand: Any) -> Any:
    operand = as_expr(value(operand))
    if isinstance(operand, int) and not isinstance(operand, bool):
        if operand < 0:
            raise trace.error(f"{construct}: {name}={operand} must not be negative")
        return tirx.const(operand, "int32")
    if not (isinstance(operand, tvm.ir.Expr) and isinstance(operand.ty, tvm.ir.PrimType)
            and str(operand.ty.dtype).startswith(("int", "uint")) and operand.ty.dtype.lanes == 1):
        raise trace.error(f"{construct}: {name} must be an integer; got {operand!r}")
    return operand


def _call(construct: str, op: str, barrier: Any, *operands: Any) -> Any:
    trace = kernel_trace(construct)
    args = [_barrier(construct, trace, barrier), *operands]
    attrs = {"tl.loc": str(trace.loc)} if trace.loc is not None else {}
    return tvm.ir.Call(tvm.ir.Op.get(op), args, attrs=attrs, ret_ty="int32")


def mbarrier_arrive(mbarrier: Any, cta_id: Any = None) -> Any:
    """One arrival on `mbarrier` by the calling thread's warp (a warp counts once, however many of its threads
    execute it). The phase completes when the allocation's arrive count (in threads, rounded up to warps) arrived
    and the expected transaction bytes landed."""
    if cta_id is not None:
        raise kernel_trace("T.mbarrier_arrive").error(
            "T.mbarrier_arrive(cta_id=...) arrives on a barrier of another block of a cluster (NVIDIA-only); MUSA "
            "barriers are per block")
    return _call("T.mbarrier_arrive", BARRIER_ARRIVE_OP, mbarrier)


def mbarrier_wait_parity(mbarrier: Any, parity: Any) -> Any:
    """Wait until the phase of `mbarrier` with parity `parity` (0 or 1, or an expression such as `(k // 2) % 2`)
    has completed. A fresh barrier is in phase 0: waiting for parity 1 returns at once."""
    trace = kernel_trace("T.mbarrier_wait_parity")
    return _call("T.mbarrier_wait_parity", BARRIER_WAIT_OP, mbarrier,
                 _int_operand("T.mbarrier_wait_parity", trace, "parity", parity))


def mbarrier_expect_tx(mbarrier: Any, tx: Any) -> Any:
    """The current phase of `mbarrier` also waits for `tx` bytes of asynchronous transactions (TME loads)."""
    trace = kernel_trace("T.mbarrier_expect_tx")
    return _call("T.mbarrier_expect_tx", BARRIER_EXPECT_TX_OP, mbarrier,
                 _int_operand("T.mbarrier_expect_tx", trace, "tx", tx))


def mbarrier_arrive_expect_tx(mbarrier: Any, tx: Any) -> Any:
    """`T.mbarrier_expect_tx(mbarrier, tx)` then `T.mbarrier_arrive(mbarrier)`."""
    trace = kernel_trace("T.mbarrier_arrive_expect_tx")
    return _call("T.mbarrier_arrive_expect_tx", BARRIER_ARRIVE_EXPECT_TX_OP, mbarrier,
                 _int_operand("T.mbarrier_arrive_expect_tx", trace, "tx", tx))


def barrier_arrive(mbarrier: Any) -> Any:
    """Upstream's short name of `T.mbarrier_arrive`."""
    return _call("T.barrier_arrive", BARRIER_ARRIVE_OP, mbarrier)


def barrier_wait(mbarrier: Any, parity: Any) -> Any:
    """Upstream's short name of `T.mbarrier_wait_parity`."""
    trace = kernel_trace("T.barrier_wait")
    return _call("T.barrier_wait", BARRIER_WAIT_OP, mbarrier, _int_operand("T.barrier_wait", trace, "parity", parity))


def ptx_arrive_barrier(mbarrier: Any) -> Any:
    """Upstream's PTX-level name of `T.mbarrier_arrive`."""
    return _call("T.ptx_arrive_barrier", BARRIER_ARRIVE_OP, mbarrier)


def ptx_arrive_barrier_expect_tx(mbarrier: Any, tx: Any) -> Any:
    """Upstream's PTX-level name of `T.mbarrier_arrive_expect_tx`."""
    trace = kernel_trace("T.ptx_arrive_barrier_expect_tx")
    return _call("T.ptx_arrive_barrier_expect_tx", BARRIER_ARRIVE_EXPECT_TX_OP, mbarrier,
                 _int_operand("T.ptx_arrive_barrier_expect_tx", trace, "tx", tx))


def cp_async_barrier_noinc(barrier: Any) -> Any:
    """CUDA's `cp.async.mbarrier.arrive.noinc`: one arrival of this thread on `barrier` once all of its asynchronous
    copies (T.ptx_cp_async, committed or not) completed. MUSA couples no copy to a barrier, so the thread waits
    for its copies here (`tl::cp_async_wait_all`), then arrives (as T.barrier_arrive): correct, at the cost of the
    producer waiting instead of moving on. The barrier's arrive count is in threads, as upstream's."""
    call = _call("T.cp_async_barrier_noinc", BARRIER_ARRIVE_OP, barrier)
    Tb.evaluate(tirx.call_extern("int32", "tl::cp_async_wait_all"))
    return call
