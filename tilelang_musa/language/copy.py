"""`T.copy`: copy a region between any two of global / shared / fragment / local memory."""

from __future__ import annotations

from typing import Any

import tvm

from ..diagnostics import warn_once
from ..ir.attrs import ASYNC_ATTR, DISABLE_TMA_ATTR, LOOP_LAYOUT_ATTR, PER_THREAD_ATTR
from ..tileop import Copy, emit_tile_op
from ..tileop.async_copy import ASYNC_WAIT, check_async_operands, check_robust_operands
from ..tileop.copy import resolve_extents
from ..tileop.parallel import THREAD_PRIVATE_SCOPES
from ..tileop.region import to_region
from .builder import kernel_trace
from .dtypes import is_sub_byte_int
from .loop import check_loop_layout
from .packed_int_copy import is_packed_int_copy, packed_int_byte_operands
from .reducer_epoch import buffer_of, note_legacy_access
from .tma import cache_hints, emit_tme_copy_candidate


def copy(src: Any, dst: Any, coalesced_width: int | None = None, disable_tma: bool = False,
         eviction_policy: str | None = None, inner_cache_policy: str | None = None,
         outer_cache_policy: str | None = None, force_async_copy: bool = False, src_robust_desc: Any = None,
         loop_layout: Any = None, prefer_instruction: str | None = None, annotations: dict | None = None,
         **kwargs: Any) -> None:
    """dst = src (cast to dst's dtype). Each side is a buffer, a slice, or an element used as the origin of
    a region shaped like the other side: `T.copy(A[by * 64, k * 32], A_shared)`.
    Elements of src outside its tensor read as zero; elements of dst outside its tensor are not written.

    `force_async_copy=True`: a global -> shared copy of the same dtype through LDLMS asynchronous copies of 4, 8 or
    16-byte pieces; it still completes before the next statement. `src_robust_desc=d` (`d = T.make_robust_desc(
    T.address_of(x[i]), nbytes)`): source bytes outside the descriptor read as 0; alone, or with force_async_copy.
    `loop_layout=F`: the copy is a T.Parallel loop over its extents that runs by the T.Fragment F, as
    `T.Parallel(..., loop_layout=F)` (never a TME copy then).
    `prefer_instruction=`: "tma" (a global -> shared copy through the TME, waited for, where it qualifies),
    "cp_async" (as force_async_copy=True) or "sync" (plain loads and stores, as disable_tma=True).
    `annotations={...}`: upstream's dict form of these keyword arguments (its values win)."""
    trace = kernel_trace("T.copy")
    for side in (src, dst):
        note_legacy_access(trace, buffer_of(side), "T.copy", store=side is dst)
    if annotations:
        names = {"coalesced_width", "disable_tma", "eviction_policy", "inner_cache_policy", "outer_cache_policy",
                 "force_async_copy", "src_robust_desc", "prefer_instruction", "parallel_loop_layout"}
        unknown = sorted(set(annotations) - names)
        if unknown:
            raise trace.error(f"T.copy: unknown annotation(s) {unknown}; known: {sorted(names)}")
        given = dict(annotations)
        coalesced_width = given.get("coalesced_width", coalesced_width)
        disable_tma = bool(given.get("disable_tma", disable_tma))
        eviction_policy = given.get("eviction_policy", eviction_policy)
        inner_cache_policy = given.get("inner_cache_policy", inner_cache_policy)
        outer_cache_policy = given.get("outer_cache_policy", outer_cache_policy)
        force_async_copy = bool(given.get("force_async_copy", force_async_copy))
        src_robust_desc = given.get("src_robust_desc", src_robust_desc)
        prefer_instruction = given.get("prefer_instruction", prefer_instruction)
        loop_layout = given.get("parallel_loop_layout", loop_layout)
    prefer_tme = False
    if prefer_instruction is not None:
        choice = str(prefer_instruction.value if hasattr(prefer_instruction, "value") else prefer_instruction)
        if choice not in ("tma", "cp_async", "sync"):
            raise trace.error(f"T.copy: prefer_instruction={choice!r}; expected 'tma', 'cp_async' or 'sync'")
        if choice == "tma" and (disable_tma or force_async_copy):
            raise trace.error("T.copy: prefer_instruction='tma' contradicts disable_tma / force_async_copy")
        prefer_tme = choice == "tma"
        force_async_copy = force_async_copy or choice == "cp_async"
        disable_tma = disable_tma or choice == "sync"
    if "barrier" in kwargs:
        raise trace.error("T.copy takes no `barrier=`: T.copy completes by itself; for a TME load the threads wait "
                          "for themselves, use T.tma_copy(src, dst, barrier=...)")
    if kwargs:
        raise trace.error(f"T.copy: unknown argument(s) {sorted(kwargs)}")
    hints = cache_hints("T.copy", trace, eviction_policy, inner_cache_policy, outer_cache_policy)
    if is_packed_int_copy(src, dst, "T.copy"):  # int4 / uint4 tiles: their bytes move
        if loop_layout is not None:
            raise trace.error("T.copy: loop_layout= maps elements onto threads, but a copy of int4 / uint4 tiles moves "
                              "their bytes (two elements each); leave it out")
        src, dst = packed_int_byte_operands("T.copy", trace, src, dst)
        coalesced_width = None if coalesced_width is None else max(coalesced_width // 2, 1)
    if coalesced_width is not None and (not isinstance(coalesced_width, int) or coalesced_width <= 0):
        raise trace.error(f"T.copy: coalesced_width={coalesced_width!r} must be a positive int (elements per access)")
    if loop_layout is not None:
        if force_async_copy or src_robust_desc is not None:
            raise trace.error("T.copy: loop_layout= maps a plain copy loop onto the threads; asynchronous and "
                              "robust-descriptor copies are cut into pieces of their own, leave it out")
        check_loop_layout("T.copy", loop_layout, None, trace.error)
    if not (disable_tma or force_async_copy or src_robust_desc is not None or loop_layout is not None) and \
            emit_tme_copy_candidate(trace, src, dst, hints, coalesced_width, prefer_tme):
        return  # a store from shared memory (or a hinted load): through the TME where it qualifies (tme_copy.py)
    if hints is not None:
        warn_once("T.copy cache policy", "T.copy: eviction_policy / inner_cache_policy / outer_cache_policy are cache "
                  "hints of TME copies (T.copy between global and shared memory on mp_31, T.tma_copy); this copy is "
                  "not one and runs without them")
    if force_async_copy and coalesced_width is not None:
        raise trace.error("T.copy: coalesced_width= has no effect with force_async_copy=True (asynchronous copies move "
                          "4, 8 or 16-byte pieces, the widest that fits); leave it out")
    emit_copy("T.copy", trace, src, dst, coalesced_width=coalesced_width,
              async_mode=ASYNC_WAIT if force_async_copy else None, robust_desc=src_robust_desc, disable_tma=disable_tma,
              loop_layout=loop_layout)


def emit_copy(construct: str, trace: Any, src: Any, dst: Any, coalesced_width: int | None = None,
              async_mode: str | None = None, robust_desc: Any = None, disable_tma: bool = False,
              loop_layout: Any = None) -> None:
    """The Copy tile op of T.copy / T.async_copy (see tileop/copy.py and tileop/async_copy.py)."""
    if robust_desc is not None and not _is_robust_desc(robust_desc):
        raise trace.error(f"{construct}: src_robust_desc must be a descriptor made by T.make_robust_desc; "
                          f"got {robust_desc!r}")
    piecewise = async_mode is not None or robust_desc is not None
    src_region, src_origin = to_region(src, construct, "src")
    dst_region, dst_origin = to_region(dst, construct, "dst")
    if is_sub_byte_int(src_region.dtype) or is_sub_byte_int(dst_region.dtype):  # T.async_copy of int4 tiles
        src, dst = packed_int_byte_operands(construct, trace, src, dst)
        src_region, src_origin = to_region(src, construct, "src")
        dst_region, dst_origin = to_region(dst, construct, "dst")
    if async_mode is not None:
        check_async_operands(construct, src_region, dst_region, trace.error)
    if robust_desc is not None:
        check_robust_operands(construct, src_region, dst_region, trace.error)
    attrs = {"coalesced_width": coalesced_width, ASYNC_ATTR: async_mode, LOOP_LAYOUT_ATTR: loop_layout}
    if loop_layout is not None and (src_region.scope in THREAD_PRIVATE_SCOPES or dst_region.scope in THREAD_PRIVATE_SCOPES):
        raise trace.error(f"{construct}: loop_layout= spreads the copy over the threads, but a copy from or to a "
                          "thread's own T.alloc_local buffer runs whole in every thread; leave it out")
    if disable_tma:  # a pipelined load (inject_software_pipeline.py) then stays off the TME
        attrs[DISABLE_TMA_ATTR] = True
    if src_origin and dst_origin:  # T.copy(A[i], s[j]): one element, copied by each thread that runs it
        if not piecewise:
            from .runtime import store

            store(dst.source, tuple(dst.indices), src)
            return
        attrs[PER_THREAD_ATTR] = 1
    else:
        src_region, dst_region = resolve_extents(src_region, src_origin, dst_region, dst_origin, trace.error)
        op = Copy(src_region, dst_region, trace.loc)
        op.copy_dims()  # validate the extents now, at the user's line
    args = [src_region.to_ir(), dst_region.to_ir()] + ([robust_desc] if robust_desc is not None else [])
    emit_tile_op(Copy.op_name, args, attrs)


def _is_robust_desc(value: Any) -> bool:
    """A variable bound to T.make_robust_desc(...) (a handle)."""
    return isinstance(value, tvm.ir.expr.Var) and isinstance(value.ty, tvm.ir.PointerType)
