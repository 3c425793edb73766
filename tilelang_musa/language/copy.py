"""`T.copy`: copy a region between any two of global / shared / fragment / local memory."""

from __future__ import annotations

from typing import Any

from ..diagnostics import warn_once
from ..errors import UnsupportedError
from ..tileop import Copy, emit_tile_op
from ..tileop.copy import resolve_extents
from ..tileop.region import to_region
from .builder import kernel_trace

_CACHE_POLICIES = ("cache_none", "cache_once", "cache_normal", "cache_persist")


def copy(src: Any, dst: Any, coalesced_width: int | None = None, disable_tma: bool = False,
         eviction_policy: str | None = None, inner_cache_policy: str | None = None,
         outer_cache_policy: str | None = None, force_async_copy: bool = False, src_robust_desc: Any = None,
         **kwargs: Any) -> None:
    """dst = src (cast to dst's dtype). Each side is a buffer, a slice, or an element used as the origin of
    a region shaped like the other side: `T.copy(A[by * 64, k * 32], A_shared)`.
    Elements of src outside its tensor read as zero; elements of dst outside its tensor are not written."""
    trace = kernel_trace("T.copy")
    if "barrier" in kwargs:
        raise trace.error("T.copy takes no `barrier=`: T.copy completes by itself, and barrier-managed asynchronous "
                          "copies (TME) are not supported yet")
    if kwargs:
        raise trace.error(f"T.copy: unknown argument(s) {sorted(kwargs)}")
    if eviction_policy is not None and (inner_cache_policy or outer_cache_policy):
        raise trace.error("T.copy: eviction_policy cannot be combined with inner_cache_policy/outer_cache_policy")
    for name, policy in (("inner_cache_policy", inner_cache_policy), ("outer_cache_policy", outer_cache_policy)):
        if policy is not None and policy not in _CACHE_POLICIES:
            raise trace.error(f"T.copy: {name}={policy!r}; choose one of {', '.join(_CACHE_POLICIES)}")
    if coalesced_width is not None and (not isinstance(coalesced_width, int) or coalesced_width <= 0):
        raise trace.error(f"T.copy: coalesced_width={coalesced_width!r} must be a positive int (elements per access)")
    if eviction_policy is not None or inner_cache_policy or outer_cache_policy:
        warn_once("T.copy cache policy", "T.copy: eviction_policy / inner_cache_policy / outer_cache_policy are cache "
                  "hints of TME copies, which this build does not emit yet: the copy runs without them")
    if force_async_copy or src_robust_desc is not None:
        what = "force_async_copy=True" if force_async_copy else "src_robust_desc="
        raise UnsupportedError(f"T.copy({what}) (the LDLMS async-copy path) is not implemented yet", trace.loc)
    src_region, src_origin = to_region(src, "T.copy", "src")
    dst_region, dst_origin = to_region(dst, "T.copy", "dst")
    if src_origin and dst_origin:  # T.copy(A[i], s[j]): one element, copied by each thread that runs it
        from .builder import store

        store(dst.source, tuple(dst.indices), src)
        return
    src_region, dst_region = resolve_extents(src_region, src_origin, dst_region, dst_origin, trace.error)
    op = Copy(src_region, dst_region, trace.loc)
    op.copy_dims()  # validate the extents now, at the user's line
    emit_tile_op(Copy.op_name, [src_region.to_ir(), dst_region.to_ir()],
                 {"coalesced_width": coalesced_width})
