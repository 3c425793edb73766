"""Upstream's Hopper ordering fences, which production kernels write around TMA stores and WGMMA accumulators:

    T.copy(C_local, C_shared); T.fence_proxy_async(); T.sync_threads(); T.copy(C_shared, C[m, n])
    T.wgmma_gemm(A_s, B_s, C_local); T.wait_wgmma(0); T.warpgroup_fence_operand(C_local, num_regs=64)

On NVIDIA the first is `fence.proxy.async` (the TMA unit reads shared memory through another proxy than the threads'
stores), the second an empty asm on each accumulator register (nvcc must not move the accumulator's uses above the
wait). MUSA's TME and SQMMA read shared memory that a block barrier has ordered (T.copy's own TME stores rely on no
more), and an SQMMA accumulator is complete after T.wait_wgmma / T.warpgroup_wait: both print
`tl::compiler_fence()`, an empty asm with a memory clobber that keeps the compiler from moving memory accesses
across it (Moore Threads' port defines its fence_proxy_async so). Their operands are checked as upstream checks them.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.tirx.script import builder as Tb

from .builder import is_buffer, kernel_trace, static_value

_FENCE = "tl::compiler_fence"


def fence_proxy_async() -> None:
    """Order this thread's shared-memory stores before an asynchronous copy (a TME store) or an SQMMA reads them;
    a barrier (T.sync_threads, a T.barrier_*) still makes them visible to the other threads. MUSA: a compiler
    fence."""
    kernel_trace("T.fence_proxy_async")
    Tb.evaluate(tirx.call_extern("int32", _FENCE))


def warpgroup_fence_operand(buffer_or_ptr: Any, offset: Any = 0, num_regs: Any = None, dtype: Any = None) -> None:
    """Keep the uses of an accumulator fragment on their side of the asynchronous GEMM's wait: `buffer_or_ptr` is
    the fragment (or an element or region of it), `num_regs` how many 32-bit registers from `offset` (derived from
    a fragment's shape when omitted). MUSA: a compiler fence (the wait completes the accumulator)."""
    trace = kernel_trace("T.warpgroup_fence_operand")
    target = buffer_or_ptr if is_buffer(buffer_or_ptr) else getattr(buffer_or_ptr, "source", None)
    if target is None or not is_buffer(target):
        raise trace.error("T.warpgroup_fence_operand: the operand must be the accumulator fragment, an element or "
                          f"a region of it; got {type(buffer_or_ptr).__name__}")
    if num_regs is None and isinstance(buffer_or_ptr, tvm.ir.expr.TensorLoad):
        raise trace.error("T.warpgroup_fence_operand: num_regs must be given when passing an element of the "
                          "accumulator")
    if dtype is not None and str(dtype) != str(target.dtype):
        raise trace.error(f"T.warpgroup_fence_operand: dtype mismatch: provided {dtype}, buffer uses {target.dtype}")
    for name, value in (("offset", offset), ("num_regs", num_regs)):
        known = static_value(value) if value is not None else 0
        if known is not None and (not isinstance(known, int) or known < 0):
            raise trace.error(f"T.warpgroup_fence_operand: {name} must be a non-negative integer; got {value!r}")
    Tb.evaluate(tirx.call_extern("int32", _FENCE))
