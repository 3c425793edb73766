"""Asynchronous copies and robust descriptors: `T.async_copy`, `T.ptx_cp_async`, `T.ptx_commit_group`,
`T.ptx_wait_group`, `T.lma_wait`, `T.make_robust_desc` (T.copy's `force_async_copy=` / `src_robust_desc=` are in
copy.py).

LDLMS copies (global -> shared, mp_22 and mp_31) land when the issuing thread waits: `T.async_copy` issues the
copy and commits it as a group; `T.ptx_wait_group(n)` waits until at most n of the thread's committed groups are
still in flight, then synchronizes the block (which publishes every thread's landed pieces). The pieces lower in
tileop/async_copy.py (T.ptx_cp_async's in tileop/ptx_cp_async.py); the templates are tl_templates/musa/async_copy.h.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..ir.ops import register_intrinsic as _register
from .builder import as_expr, kernel_trace, take_name

MAKE_ROBUST_DESC_OP = "tl.make_robust_desc"  # (address, size_bytes) -> a robust descriptor (handle)
_register(MAKE_ROBUST_DESC_OP, "a robust descriptor: loads through it outside [address, address + bytes) read 0")


def async_copy(src: Any, dst: Any, coalesced_width: int | None = None, *, annotations: dict | None = None,
               loop_layout: Any = None) -> None:
    """Issue an asynchronous (LDLMS) copy of a global region into a shared tile and commit it as one group, without
    waiting: wait with `T.ptx_wait_group(n)` before reading `dst`. The same conditions as
    `T.copy(..., force_async_copy=True)` (global source, shared destination, same dtype, 4/8/16-byte pieces).
    `loop_layout=F` (upstream's thread assignment of the copy loop, a T.Fragment over the copy's extents): each
    thread copies the elements F gives it, in pieces no wider than F's runs of a thread's consecutive elements. A
    kernel that reads back only what each thread copied itself needs no barrier between its reads and the next
    copy into the tile (TileKernels' engram gate backward, with TL_DISABLE_THREAD_STORAGE_SYNC).
    `annotations={...}`: upstream's dict form of both keywords."""
    from ..tileop.async_copy import ASYNC_COMMIT
    from .copy import emit_copy
    from .loop import check_loop_layout

    trace = kernel_trace("T.async_copy")
    if annotations:
        unknown = sorted(set(annotations) - {"coalesced_width", "parallel_loop_layout"})
        if unknown:
            raise trace.error(f"T.async_copy: unknown annotation(s) {unknown}; known: ['coalesced_width', "
                              "'parallel_loop_layout']")
        coalesced_width = annotations.get("coalesced_width", coalesced_width)
        loop_layout = annotations.get("parallel_loop_layout", loop_layout)
    if loop_layout is not None:
        check_loop_layout("T.async_copy", loop_layout, None, trace.error)
    if coalesced_width is not None:
        raise trace.error("T.async_copy: coalesced_width= has no effect on asynchronous copies (their pieces are "
                          "4, 8 or 16 bytes, the widest that fits); leave it out")
    emit_copy("T.async_copy", trace, src, dst, async_mode=ASYNC_COMMIT, loop_layout=loop_layout)


def ptx_cp_async(dst_access_ptr: Any, src_access_ptr: Any, num_elems: Any, predicate: Any = None) -> Any:
    """`T.ptx_cp_async(T.access_ptr(S[r, c], "w"), T.access_ptr(X[i, j], "r"), n)`: one asynchronous (LDLMS) copy
    of n elements (4, 8 or 16 bytes) from a global address to a shared one by this thread, as upstream's raw
    cp.async; `predicate=` false stores zeros instead. Inside `for v in T.vectorized(L)`, copies of n elements per
    lane at addresses n elements apart fold into one copy of L * n elements, which must be 4, 8 or 16 bytes. Not
    committed: `T.ptx_commit_group()` then `T.ptx_wait_group(n)`, or `T.cp_async_barrier_noinc(b)`, complete it. In a tile stored in a layout (a gemm's
    swizzle), the n elements must stay contiguous in it (a compile error otherwise)."""
    from ..tileop.access_ptr import READ, WRITE, as_access
    from ..tileop.ptx_cp_async import cp_async_ptr_call

    trace = kernel_trace("T.ptx_cp_async")
    dst, src = as_access(as_expr(dst_access_ptr)), as_access(as_expr(src_access_ptr))
    if dst is None or src is None:
        raise trace.error("T.ptx_cp_async: the destination and source must be T.access_ptr(X[i], ...) of tensor "
                          f"elements; got {dst_access_ptr!r}, {src_access_ptr!r}")
    dst_scope, src_scope = (str(a.element.source.ty.storage_scope) for a in (dst, src))
    if not dst_scope.startswith("shared") or dst_scope == "shared.barrier" or not dst.rw & WRITE:
        raise trace.error(f"T.ptx_cp_async: the destination must be a shared tile element written through "
                          f"(T.access_ptr(S[...], \"w\")); got `{dst.element.source.name}` ({dst_scope})")
    if src_scope != "global" or not src.rw & READ:
        raise trace.error(f"T.ptx_cp_async: the source must be a global tensor element read through "
                          f"(T.access_ptr(X[...], \"r\")); got `{src.element.source.name}` ({src_scope})")
    dtype, src_dtype = (str(a.element.source.ty.dtype.dtype) for a in (dst, src))
    if dtype != src_dtype:
        raise trace.error(f"T.ptx_cp_async: the destination is {dtype} and the source {src_dtype}; an asynchronous "
                          "copy moves bytes, so they must match")
    if isinstance(num_elems, tirx.IntImm):
        num_elems = int(num_elems.value)
    bits = tvm.runtime.DataType(dtype).bits
    # Fewer than 16 bytes that are not 4 or 8 may be one lane of a T.vectorized loop, whose lanes FoldCpAsyncLanes
    # folds into one copy (or refuses at this line).
    if not isinstance(num_elems, int) or isinstance(num_elems, bool) or num_elems <= 0 or num_elems * bits > 128:
        raise trace.error(f"T.ptx_cp_async: {num_elems!r} elements of {dtype}: an LDLMS copy moves 4, 8 or 16 "
                          "bytes (a constant count)")
    if predicate is not None:
        predicate = as_expr(predicate)
    return cp_async_ptr_call(dst_access_ptr, src_access_ptr, num_elems, predicate, trace.loc)


def ptx_commit_group() -> Any:
    """Close the group of asynchronous copies this thread issued since the last commit (T.async_copy commits its
    own group; this is for copies issued otherwise)."""
    kernel_trace("T.ptx_commit_group")
    return tirx.call_extern("int32", "tl::cp_async_commit")


def ptx_wait_group(num: int) -> None:
    """Wait until at most `num` of this thread's committed groups of asynchronous copies are still in flight
    (`num=0`: all landed; older mcc (4.x) waits for all of them whatever `num` is), then synchronize the block: a
    copy lands for the thread that issued it, and the barrier makes every landed piece visible to every thread
    (the compiler cannot see which tiles the wait completes). Every thread of the block must reach it."""
    trace = kernel_trace("T.ptx_wait_group")
    if isinstance(num, tirx.IntImm):
        num = int(num.value)
    if not isinstance(num, int) or isinstance(num, bool) or num < 0:
        raise trace.error(f"T.ptx_wait_group: num must be a non-negative int (groups left in flight); got {num!r}")
    Tb.evaluate(tirx.call_extern("int32", f"tl::cp_async_wait<{num}>"))
    Tb.evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))


def lma_wait() -> Any:
    """Wait for the warp's outstanding LMA operations (`__musa_lma_wait`; a warp barrier on older mcc)."""
    kernel_trace("T.lma_wait")
    return tirx.call_extern("int32", "tl::lma_wait")


def make_robust_desc(addr: Any, size_bytes: Any) -> Any:
    """`d = T.make_robust_desc(T.address_of(src[1]), 8)`: a descriptor of the `size_bytes` bytes from `addr` (a
    global address). `T.copy(src, dst, src_robust_desc=d)` reads the source through it: bytes outside read as 0."""
    trace = kernel_trace("T.make_robust_desc")
    addr = as_expr(addr)
    if not (isinstance(addr, tvm.ir.Call) and isinstance(addr.op, tvm.ir.Op) and str(addr.op.name) == "tirx.address_of"
            and str(addr.args[0].source.ty.storage_scope) == "global"):
        raise trace.error(f"T.make_robust_desc: addr must be the address of a global tensor element, "
                          f"T.address_of(x[i]); got {addr!r}")
    if isinstance(size_bytes, int) and not isinstance(size_bytes, bool):
        if size_bytes < 0:
            raise trace.error(f"T.make_robust_desc: size_bytes={size_bytes} must not be negative")
        size_bytes = tirx.const(size_bytes, "int64")
    size_bytes = as_expr(size_bytes)
    if not (isinstance(size_bytes, tvm.ir.Expr) and isinstance(size_bytes.ty, tvm.ir.PrimType)
            and str(size_bytes.ty.dtype).startswith(("int", "uint"))):
        raise trace.error(f"T.make_robust_desc: size_bytes must be an integer; got {size_bytes!r}")
    call = tvm.ir.Call(tvm.ir.Op.get(MAKE_ROBUST_DESC_OP), [addr, size_bytes], ret_ty="handle")
    var = Tb.Bind(call)
    IRBuilder.name(take_name("robust_desc"), var)
    return var
