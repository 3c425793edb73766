"""Thread-level built-ins of the language (`T.sync_threads`, ...)."""

from __future__ import annotations

import tvm
from tvm import tirx
from tvm.tirx.script import builder as Tb

from ..ir.attrs import USER_BARRIER_ID, USER_BLOCK_BARRIER, USER_NAMED_BARRIER
from ..ir.ops import NAMED_BARRIER_ARRIVE_OP, SYNC_GRID_OP, USE_SWIZZLE_OP, WAIT_SQMMA_OP
from .builder import kernel_trace, static_value

_SYNC_SCOPES = {"shared": "__syncthreads()", "shared.dyn": "__syncthreads()", "warp": "__syncwarp()"}


def tvm_storage_sync(scope: str = "shared") -> None:
    """TVM's spelling of a barrier: `T.tvm_storage_sync("shared")` (or "shared.dyn") is a block barrier, as
    T.sync_threads(); "warp" is a barrier of the calling warp (`__syncwarp()`). TVM's grid-wide "global" scope is
    an error: the grid barrier is T.sync_grid(), in a cooperative launch.
    Example: S[tx] = A[tx]; T.tvm_storage_sync("shared"); B[tx] = S[127 - tx]"""
    trace = kernel_trace("T.tvm_storage_sync")
    if scope not in _SYNC_SCOPES:
        raise trace.error(f"T.tvm_storage_sync: scope {scope!r} is not supported on MUSA; use one of "
                          f"{', '.join(map(repr, _SYNC_SCOPES))}"
                          + (" (a grid-wide barrier is T.sync_grid())" if scope == "global" else ""))
    Tb.evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", scope))


def sync_threads(barrier_id: int | None = None, arrive_count: int | None = None) -> None:
    """A block-wide barrier (`__syncthreads()`): every thread's earlier shared-memory writes are visible to
    every thread after it. The compiler inserts the barriers a kernel needs by itself; this is for code
    that needs one the analysis cannot see.

    Upstream's named form `T.sync_threads(barrier_id, arrive_count)`: `arrive_count` threads (a multiple of the
    warp size, the warps that take part) wait for each other at barrier `barrier_id` (0..15); the other threads
    do not take part. When every thread of the block arrives it is the block barrier. On mp_31 a named barrier is
    an asynchronous barrier of `arrive_count` threads (arrive, then wait for the phase it arrived in); mp_21/mp_22
    have none (a compile error)."""
    trace = kernel_trace("T.sync_threads")
    static_id = static_value(barrier_id) if isinstance(barrier_id, tvm.ir.Expr) else barrier_id
    if static_id is not None and (not isinstance(static_id, int) or not 0 <= static_id < 16):
        raise trace.error(f"T.sync_threads: barrier_id={barrier_id!r} must be an integer from 0 to 15")
    if isinstance(barrier_id, tvm.ir.Expr) and not str(barrier_id.ty.dtype).startswith(("int", "uint")):
        raise trace.error(f"T.sync_threads: barrier_id `{barrier_id}` must be an integer")
    threads = trace.kernel.num_threads
    if arrive_count is None or arrive_count == threads:
        # marked as the user's: under a condition that is no thread range (RangeBarriers) it stays a block barrier
        attrs = {USER_BLOCK_BARRIER: 1, **({"tl.loc": str(trace.loc)} if trace.loc is not None else {})}
        if static_id is not None:  # a T.named_barrier_arrive on this id makes it that named barrier (_finish)
            attrs[USER_BARRIER_ID] = [static_id, threads]
        Tb.evaluate(tvm.ir.Call(tvm.ir.Op.get("tirx.tvm_storage_sync"), [tvm.ir.expr.StringImm("shared")],
                                attrs=attrs, ret_ty="int32"))
        return
    if not isinstance(arrive_count, int) or isinstance(arrive_count, bool) or not 0 < arrive_count < threads:
        raise trace.error(f"T.sync_threads: arrive_count={arrive_count!r} must be a positive int of at most the "
                          f"block's {threads} threads")
    if static_id is None:
        raise trace.error(f"T.sync_threads: a barrier over {arrive_count} of the block's {threads} threads (a named "
                          f"barrier) needs a compile-time barrier_id from 0 to 15; got {barrier_id!r}")
    attrs = {USER_NAMED_BARRIER: 1, **({"tl.loc": str(trace.loc)} if trace.loc is not None else {})}
    # IR of a named barrier: tvm_storage_sync("shared", id, count); LowerAsyncBarriers makes it an async barrier.
    Tb.evaluate(tvm.ir.Call(tvm.ir.Op.get("tirx.tvm_storage_sync"),
                            [tvm.ir.expr.StringImm("shared"), tirx.const(static_id, "int32"),
                             tirx.const(arrive_count, "int32")], attrs=attrs, ret_ty="int32"))


def named_barrier_arrive(barrier_id: int, thread_count: int) -> None:
    """Arrive at named barrier `barrier_id` (0..15) without waiting (upstream's `bar.arrive`): the other side
    waits with `T.sync_threads(barrier_id, thread_count)`, which completes once `thread_count` threads (whole
    warps; the arrivals of both sides together) have arrived. For producer/consumer hand-offs between warp groups.
    On mp_31 it is an arrival on the asynchronous barrier that named barrier becomes; mp_21/mp_22 have none (a
    compile error). Example: T.named_barrier_arrive(10, 256) in the producer, T.sync_threads(10, 256) in the
    consumer."""
    trace = kernel_trace("T.named_barrier_arrive")
    static_id = static_value(barrier_id) if isinstance(barrier_id, tvm.ir.Expr) else barrier_id
    static_count = static_value(thread_count) if isinstance(thread_count, tvm.ir.Expr) else thread_count
    if not isinstance(static_id, int) or isinstance(static_id, bool) or not 0 <= static_id < 16:
        raise trace.error(f"T.named_barrier_arrive: barrier_id={barrier_id!r} must be a compile-time integer from "
                          "0 to 15")
    threads = trace.kernel.num_threads
    if not isinstance(static_count, int) or isinstance(static_count, bool) or not 0 < static_count <= threads:
        raise trace.error(f"T.named_barrier_arrive: thread_count={thread_count!r} must be a compile-time int from 1 "
                          f"to the block's {threads} threads")
    trace.named_arrive_ids.add(static_id)
    attrs = {USER_NAMED_BARRIER: 1, **({"tl.loc": str(trace.loc)} if trace.loc is not None else {})}
    Tb.evaluate(tvm.ir.Call(tvm.ir.Op.get(NAMED_BARRIER_ARRIVE_OP),
                            [tirx.const(static_id, "int32"), tirx.const(static_count, "int32")],
                            attrs=attrs, ret_ty="int32"))


def sync_grid() -> None:
    """A grid-wide barrier (`cooperative_groups::this_grid().sync()`): every thread of every block waits here
    until all have arrived, and every global-memory write before it is visible to every thread after it. The
    kernel is then launched cooperatively (musaLaunchCooperativeKernel), which needs every block resident at once:
    a grid larger than the device holds is a launch error. Every thread of every block must reach each grid
    barrier the same number of times."""
    trace = kernel_trace("T.sync_grid")
    attrs = {"tl.loc": str(trace.loc)} if trace.loc is not None else {}
    Tb.evaluate(tvm.ir.Call(tvm.ir.Op.get(SYNC_GRID_OP), [], attrs=attrs, ret_ty="int32"))


def thread_return() -> None:
    """The calling thread leaves the kernel here (CUDA's `return` in device code). Threads that left take no
    part in later barriers: a block barrier after it, in a block where some threads returned, is an error the
    simulator reports."""
    kernel_trace("T.thread_return")
    Tb.evaluate(tirx.call_intrin("int32", "tirx.thread_return"))


def use_swizzle(panel_size: int, order: str = "row", enable: bool = True) -> None:
    """Block rasterization: remap the block indices so that consecutive blocks walk panels of `panel_size`
    rows (order="row") or columns (order="col") of the grid, for better L2 reuse. A bijection over the grid:
    results never change. Applies to the whole kernel (the block indices are remapped at its start)."""
    trace = kernel_trace("T.use_swizzle")
    if order not in ("row", "col"):
        raise trace.error(f"T.use_swizzle: order must be 'row' or 'col'; got {order!r}")
    if not isinstance(panel_size, int) or panel_size <= 0:
        raise trace.error(f"T.use_swizzle: panel_size must be a positive int; got {panel_size!r}")
    if not enable:
        return
    Tb.evaluate(tirx.call_intrin("int32", USE_SWIZZLE_OP, panel_size, tvm.ir.expr.StringImm(order)))


def wait_sqmma(num_pending: int = 0) -> None:
    """Wait until at most `num_pending` (0..2) of the asynchronous SQMMA GEMMs issued with
    `T.gemm(..., wg_wait=-1)` are still in flight. Call it before reading the accumulator or overwriting the
    operand tiles. (On paths that are synchronous anyway, e.g. mp_22 or WMMA, there is nothing to wait for.)"""
    trace = kernel_trace("T.wait_sqmma")
    if not isinstance(num_pending, int) or not 0 <= num_pending <= 2:
        raise trace.error(f"T.wait_sqmma: num_pending must be 0, 1 or 2; got {num_pending!r}")
    Tb.evaluate(tirx.call_intrin("int32", WAIT_SQMMA_OP, num_pending))


wait_wgmma = wait_sqmma  # upstream's (Hopper) spelling
