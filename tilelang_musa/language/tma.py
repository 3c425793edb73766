"""`T.tma_copy`, `T.tma_store_arrive`, `T.tma_store_wait`: copies through mp_31's TME with the user's synchronisation.

    barrier = T.alloc_barrier(128)
    T.tma_copy(A[by * 64, 0], A_shared, barrier=barrier)   # one thread issues; the barrier waits for the bytes
    T.barrier_arrive(barrier)
    T.barrier_wait(barrier, 0)
    ...
    T.tma_copy(C_shared, C[by * 64, 0])                      # store + commit, no wait
    T.tma_store_wait()                                       # before C_shared is written again
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm.tirx.script import builder as Tb

from ..tileop import Copy, emit_tile_op
from ..tileop.copy import resolve_extents
from ..tileop.region import TensorLoad, is_buffer, to_region
from ..tileop.tme_copy import (
    CACHE_POLICIES, DEFAULT_HINT, EVICTION_POLICIES, TME_STORE_ARRIVE, TME_STORE_WAIT, TME_STORE_WAIT_WRITES, TmeCopy,
)
from .builder import kernel_trace

_SHARED = ("shared", "shared.dyn")


def cache_hints(construct: str, trace, eviction_policy: str | None, inner_cache_policy: str | None,
                outer_cache_policy: str | None) -> tuple[int, int] | None:
    """The TME (inner, outer) cache hint codes the options ask for, or None when none is given. The CUDA-style
    `eviction_policy` sets both (as the port maps it) and excludes the other two."""
    if eviction_policy is not None and (inner_cache_policy is not None or outer_cache_policy is not None):
        raise trace.error(f"{construct}: eviction_policy cannot be combined with inner_cache_policy/outer_cache_policy")
    if eviction_policy is not None:
        if eviction_policy not in EVICTION_POLICIES:
            raise trace.error(f"{construct}: eviction_policy={eviction_policy!r}; choose one of "
                              f"{', '.join(EVICTION_POLICIES)}")
        code = EVICTION_POLICIES[eviction_policy]
        return code, code
    for name, policy in (("inner_cache_policy", inner_cache_policy), ("outer_cache_policy", outer_cache_policy)):
        if policy is not None and policy not in CACHE_POLICIES:
            raise trace.error(f"{construct}: {name}={policy!r}; choose one of {', '.join(CACHE_POLICIES)}")
    if inner_cache_policy is None and outer_cache_policy is None:
        return None
    return (CACHE_POLICIES.get(inner_cache_policy, DEFAULT_HINT), CACHE_POLICIES.get(outer_cache_policy, DEFAULT_HINT))


def _barrier_load(barrier: Any, trace) -> Any:
    """`b` alone means b[0]; `b[i]` is barrier i of a T.alloc_barrier buffer."""
    if is_buffer(barrier):
        barrier = barrier[0]
    if not isinstance(barrier, TensorLoad) or str(barrier.source.ty.storage_scope) != "shared.barrier":
        raise trace.error(f"T.tma_copy: barrier= must be a barrier from T.alloc_barrier (or one element of it); "
                          f"got {barrier!r}")
    return barrier


def tma_copy(src: Any, dst: Any, *, barrier: Any = None, leader_scope_threads: int | None = None,
             eviction_policy: str | None = None, inner_cache_policy: str | None = None,
             outer_cache_policy: str | None = None) -> None:
    """Copy a box between a global tensor and a shared tile through the TME (mp_31), issued by one thread.

    Load (global -> shared): `barrier=` is required; the copy adds its bytes to the barrier's current phase and
    does not wait: the threads arrive on and wait for the barrier before reading the tile. Store (shared ->
    global): the store is committed, not waited for (`T.tma_store_wait()`). The issuing thread is the first of
    the threads that reach the call, or of every `leader_scope_threads` of them. Cache hints
    (`inner_cache_policy` / `outer_cache_policy`: cache_none|cache_once|cache_normal|cache_persist, or
    `eviction_policy`: evict_normal|evict_first|evict_last) go to the instruction. Box elements outside the
    tensor load as zero and are not stored."""
    trace = kernel_trace("T.tma_copy")
    hints = cache_hints("T.tma_copy", trace, eviction_policy, inner_cache_policy, outer_cache_policy)
    if leader_scope_threads is not None and (not isinstance(leader_scope_threads, int) or leader_scope_threads <= 0
                                             or leader_scope_threads % 32):
        raise trace.error(f"T.tma_copy: leader_scope_threads={leader_scope_threads!r} must be a positive multiple "
                          "of 32 (threads per election scope)")
    src_region, src_origin = to_region(src, "T.tma_copy", "src")
    dst_region, dst_origin = to_region(dst, "T.tma_copy", "dst")
    src_region, dst_region = resolve_extents(src_region, src_origin, dst_region, dst_origin,
                                             lambda m: trace.error(m.replace("T.copy", "T.tma_copy")))
    scopes = (src_region.scope, dst_region.scope)
    is_load = scopes[0] == "global" and scopes[1] in _SHARED
    is_store = scopes[0] in _SHARED and scopes[1] == "global"
    if not (is_load or is_store):
        raise trace.error(f"T.tma_copy copies global -> shared (a load) or shared -> global (a store); got "
                          f"{src_region.name} ({scopes[0]}) -> {dst_region.name} ({scopes[1]})")
    args = [src_region.to_ir(), dst_region.to_ir()]
    if is_load:
        if barrier is None:
            raise trace.error("T.tma_copy: a load (global -> shared) needs barrier=...: the copy arrives on it, and "
                              "the threads wait on it (T.barrier_arrive / T.barrier_wait) before reading the tile")
        args.append(_barrier_load(barrier, trace))
    elif barrier is not None:
        raise trace.error("T.tma_copy: a store (shared -> global) takes no barrier; wait for it with "
                          "T.tma_store_wait()")
    inner, outer = hints if hints is not None else (None, None)
    emit_tile_op(TmeCopy.op_name, args, {"inner_cache_policy": inner, "outer_cache_policy": outer,
                                         "leader_scope_threads": leader_scope_threads})


def emit_tme_copy_candidate(trace, src: Any, dst: Any, hints: tuple[int, int] | None,
                            coalesced_width: int | None, prefer_tme: bool = False) -> bool:
    """T.copy(shared, global), and T.copy(global, shared) given cache hints or prefer_instruction="tma"
    (prefer_tme): emit it as a TME copy that waits for itself (mp_31, where it qualifies; else LowerTmeCopy lowers
    it as the plain copy) and return True; False for any other copy."""
    src_region, src_origin = to_region(src, "T.copy", "src")
    dst_region, dst_origin = to_region(dst, "T.copy", "dst")
    is_store = src_region.scope in _SHARED and dst_region.scope == "global"
    is_load = src_region.scope == "global" and dst_region.scope in _SHARED and (hints is not None or prefer_tme)
    if not (is_store or is_load) or (src_origin and dst_origin):
        return False
    src_region, dst_region = resolve_extents(src_region, src_origin, dst_region, dst_origin, trace.error)
    Copy(src_region, dst_region, trace.loc).copy_dims()  # validate the extents now, at the user's line
    inner, outer = hints if hints is not None else (None, None)
    emit_tile_op(TmeCopy.op_name, [src_region.to_ir(), dst_region.to_ir()],
                 {"inner_cache_policy": inner, "outer_cache_policy": outer, "wait": 1, "explicit": 0,
                  "coalesced_width": coalesced_width})
    return True


def _store_sync(op: str, trace, extra: dict | None = None) -> None:
    attrs = {**({"tl.loc": str(trace.loc)} if trace.loc is not None else {}), **(extra or {})} or None
    Tb.evaluate(tvm.ir.Call(tvm.ir.Op.get(op), [], attrs=attrs, ret_ty="int32"))


def tma_store_arrive() -> None:
    """Commit this thread's TME stores issued since the last commit (T.tma_copy stores already commit)."""
    _store_sync(TME_STORE_ARRIVE, kernel_trace("T.tma_store_arrive"))


def tma_store_wait(*args: Any, **kwargs: Any) -> None:
    """Wait until this thread's committed TME stores have read their shared tiles (then the tiles may be written
    again). Upstream's count argument must be 0: MUSA waits for all of them."""
    trace = kernel_trace("T.tma_store_wait")
    count = args[0] if args else kwargs.pop("count", 0)
    read = args[1] if len(args) > 1 else kwargs.pop("read", True)
    if not isinstance(read, bool):
        raise trace.error(f"T.tma_store_wait: read must be True or False; got {read!r}")
    if kwargs or len(args) > 2 or count != 0:
        raise trace.error("T.tma_store_wait: MUSA waits for all committed TME stores to have read shared memory; "
                          "only T.tma_store_wait() (count 0) is supported")
    # read=False is refused by LowerTmeCopy, at compile time with the other per-arch rejections (as upstream's).
    _store_sync(TME_STORE_WAIT, trace, {} if read else {TME_STORE_WAIT_WRITES: 1})
