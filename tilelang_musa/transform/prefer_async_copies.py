"""`T.Parallel(..., prefer_async=True)`: the nest's element copies from global memory into a shared tile become
LDLMS asynchronous copies, as upstream's cp.async injection makes them (its lower_tile_op.cc hands such a loop to
ptx_async_copy_injector.cc).

Two passes, because the partitioning passes rebuild the user's loops without their annotations:
- MarkPreferAsyncLoops (right before LowerParallelLoop) wraps each nest whose outer loop asks for it in an AttrStmt
  `tl.prefer_async_copies`, valued 1 where the compiler commits and waits, 0 where the user does
  (`annotations={"parallel_async_without_async_commit_wait": True}`). Upstream's rule: `prefer_async=True`, or that
  annotation while TL_ENABLE_ASYNC_COPY is on; only where the arch has LDLMS (mp_22 and later).
- LowerPreferAsyncCopies (after SafeMemoryAccess: each thread's loops, vector widths and bounds guards are final)
  rewrites each store `S[..] = A[..]` in the region (shared <- global, one dtype, under any number of
  `if_then_else(c, ., 0)`: the user's zero fill and the bounds guards) that moves 4, 8 or 16 contiguous, aligned
  bytes (a T.vectorized run of lanes, or one 4-byte element) into `tl::cp_async_gs<B>(&S[..], &A[..])`;
  `tl::cp_async_gs_conditional<B>(.., c)` under conditions (zeros where c is false, the source address then the
  tensor's first element). Other stores stay synchronous, as upstream leaves them. Where the compiler commits and
  waits, `tl::cp_async_commit();` follows the nest and `tl::cp_async_wait<0>();` comes just before the first later
  statement of the same sequence that names a tile the copies write or calls anything but arithmetic (a barrier,
  a template), else at the sequence's end (upstream waits right after the nest): the statements between overlap
  the copies, the tile is whole before its first read, and the barrier passes order other threads' reads after.
  Where the nest follows groups of LDLMS copies into other tiles (a T.Pipelined loop's prefetch of its next stages,
  already lowered here), its copies and commit move before them and the wait counts the groups committed after
  its own (`wait<k>`; the pipeline's wait right after, where it covers the nest's group, is the wait): waiting for
  the nest's tile leaves the prefetch in flight, where `wait<0>` after it waited for the prefetch too.
  Where the user does, a read before the user's wait is the simulator's late-data error.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.attrs import PREFER_ASYNC, PREFER_ASYNC_REGION, PREFER_ASYNC_WITHOUT_COMMIT_WAIT
from ..ir.options import CompileOptions
from ..ir.utils import TensorLoad, as_int, dtype_bytes, flat_index, is_buffer, scope_of, seq, substitute
from ..target import arch_of
from ..tileop.access_ptr import WRITE, access_ptr
from ..tileop.async_copy import ASYNC_PIECE_BYTES, commit_group, wait_group
from ..tileop.loop_plan import hoist_lane_from_xor, provably_aligned
from .pass_base import tl_pass

_SHARED = ("shared", "shared.dyn")


def _flag(loop: tirx.For, key: str) -> bool:
    value = loop.annotations.get(key) if loop.annotations is not None else None
    return value is not None and bool(value)


def mark_prefer_async_loops(func: tirx.PrimFunc, enable_async_copy: bool = True) -> tirx.PrimFunc:
    target = func.attrs.get("target") if func.attrs is not None else None
    if target is not None and not arch_of(target).has_async_copy:
        return func

    def on_for(node: tirx.For, mutator: Any) -> Any:
        without_commit_wait = _flag(node, PREFER_ASYNC_WITHOUT_COMMIT_WAIT)
        if not (_flag(node, PREFER_ASYNC) or (enable_async_copy and without_commit_wait)):
            return mutator.default_mutate(node)
        return tirx.AttrStmt(tirx.const(0, "int32"), PREFER_ASYNC_REGION,
                             tirx.const(0 if without_commit_wait else 1, "int32"), node)

    body = tvm_ffi.structural_mutate(func.body, [(tirx.For, on_for)])
    return func if body.same_as(func.body) else func.with_body(body)


def _is_zero(expr: Any) -> bool:
    return isinstance(expr, (tirx.IntImm, tirx.FloatImm)) and float(expr.value) == 0.0


def _zero_filled_load(value: Any) -> tuple[Any, list] | None:
    """(the load, the conditions under which the value is that load, else zero) or None."""
    conds = []
    while True:
        if isinstance(value, TensorLoad):
            return value, conds
        if isinstance(value, tirx.Select) and _is_zero(value.false_value):
            conds.append(value.condition)
            value = value.true_value
        elif isinstance(value, tvm.ir.Call) and str(value.op.name) == "prim.if_then_else" and _is_zero(value.args[2]):
            conds.append(value.args[0])
            value = value.args[1]
        else:
            return None


def _uses(expr: Any, var: Any) -> bool:
    found = []
    tvm_ffi.structural_walk(expr, [(tirx.Var, lambda v: found.append(v) if v.same_as(var) else None)])
    return bool(found)


def _moves_by_lane(buffer: Any, indices: list, lane: tirx.For) -> bool:
    """Whether the access's element moves by one per lane from a multiple of the lane count."""
    lanes = as_int(lane.extent)
    ana = tvm.sym.Analyzer()
    ana.bind(lane.loop_var, tvm.ir.Range.from_min_extent(lane.min, lane.extent))
    # a swizzled tile's `(base + lane) ^ b` is `(base ^ b) + lane` where the lanes stay in the low bits
    flat = hoist_lane_from_xor(flat_index(buffer, indices), lane.loop_var, lanes, ana)
    first = substitute(flat, {lane.loop_var: lane.min})
    if not ana.can_prove_equal(flat - first, lane.loop_var - lane.min):
        return False
    return provably_aligned(ana.simplify(first), lanes, ana)


def _async_copy(store: Any, lane: tirx.For | None) -> Any:
    """The LDLMS copy that does `store` (over the lanes of `lane`, a T.vectorized loop), or None."""
    found = _zero_filled_load(store.value)
    if found is None or scope_of(store.buffer) not in _SHARED:
        return None
    load, conds = found
    dtype = store.buffer.ty.dtype
    if scope_of(load.source) != "global" or str(load.source.ty.dtype) != str(dtype) or store.value.ty.dtype.lanes != 1:
        return None
    lanes = 1 if lane is None else as_int(lane.extent)
    if lanes is None or dtype_bytes(dtype) * lanes not in ASYNC_PIECE_BYTES:
        return None
    dst, src = list(store.indices), list(load.indices)
    if lane is not None:
        if any(_uses(c, lane.loop_var) for c in conds) or not all(
                _moves_by_lane(b, i, lane) for b, i in ((store.buffer, dst), (load.source, src))):
            return None
        ana = tvm.sym.Analyzer()
        dst, src = ([ana.simplify(substitute(i, {lane.loop_var: lane.min})) for i in idx] for idx in (dst, src))
    cond = None
    for c in conds:
        cond = c if cond is None else tirx.And(cond, c)
    nbytes = dtype_bytes(dtype) * lanes
    dst_ptr = access_ptr(store.buffer[tuple(dst)], WRITE)
    if cond is None:
        return tirx.Evaluate(tirx.call_extern("int32", f"tl::cp_async_gs<{nbytes}>", dst_ptr,
                                              tirx.address_of(load.source[tuple(src)])))
    # A piece not copied reads nothing, and its address stays inside the tensor (its first element).
    in_bounds = tirx.Var("in_bounds", "bool")
    src = [i if isinstance(i, tirx.IntImm) else tirx.Select(in_bounds, i, tirx.const(0, i.ty.dtype)) for i in src]
    call = tirx.call_extern("int32", f"tl::cp_async_gs_conditional<{nbytes}>", dst_ptr,
                            tirx.address_of(load.source[tuple(src)]), in_bounds)
    return tirx.SeqStmt([tirx.Bind(in_bounds, cond), tirx.Evaluate(call)])


def _lower_region(region: tirx.AttrStmt) -> tuple[Any, list]:
    """The region's body with its copies asynchronous, and the shared tiles they write."""
    converted = []

    def on_for(node: tirx.For, mutator: Any) -> Any:
        if node.kind != tirx.ForKind.VECTORIZED:
            return mutator.default_mutate(node)
        stores = list(node.body.seq) if isinstance(node.body, tirx.SeqStmt) else [node.body]
        copies = [_async_copy(s, node) if isinstance(s, tirx.BufferStore) else None for s in stores]
        if None in copies:  # a lane's copy is not 4, 8 or 16 bytes, or not a copy: the vector stores stay
            return node
        converted.extend(s.buffer for s in stores)
        return seq(copies)

    def on_store(node: Any, mutator: Any) -> Any:
        copy = _async_copy(node, None)
        converted.append(node.buffer) if copy is not None else None
        return copy if copy is not None else node

    body = tvm_ffi.structural_mutate(region.body, [(tirx.For, on_for), (tirx.BufferStore, on_store)])
    return body, converted


_ORDERING_CALLS = ("tirx.tvm_storage_sync", "tirx.call_extern", "tirx.call_packed", "tirx.tvm_call_packed")


def _needs_the_tiles(stmt: Any, tiles: list) -> bool:
    """Whether `stmt` may read the tiles or order other threads' reads of them: it names one, or calls a barrier,
    a template or anything else that is not plain arithmetic (the wait must come first)."""
    handles = {t.__chandle__() for t in tiles}
    found = []
    tvm_ffi.structural_walk(stmt, [
        (tirx.Var, lambda v: found.append(v) if v.__chandle__() in handles else None),
        (tvm.ir.Call, lambda c: found.append(c) if isinstance(c.op, tvm.ir.Op) and (
            str(c.op.name) in _ORDERING_CALLS or str(c.op.name).startswith("tl.")) else None)])
    return bool(found)


def _extern_name(stmt: Any) -> str:
    """The function a statement `T.call_extern(...)` calls ("" for any other statement)."""
    value = stmt.value if isinstance(stmt, tirx.Evaluate) else None
    if isinstance(value, tvm.ir.Call) and isinstance(value.op, tvm.ir.Op) and str(value.op.name) == "tirx.call_extern":
        return str(value.args[0].value)
    return ""


def _is_commit(stmt: Any) -> bool:
    return _extern_name(stmt) == "tl::cp_async_commit"


def _covering_wait(stmt: Any, after: int) -> bool:
    """Whether `stmt` is a `tl::cp_async_wait<n>` that already waits for a group with `after` groups after it."""
    name = _extern_name(stmt)
    prefix = "tl::cp_async_wait<"
    return name.startswith(prefix) and name[len(prefix):-1].isdigit() and int(name[len(prefix):-1]) <= after


def _async_copies_only(stmt: Any, tiles: list) -> bool:
    """Whether `stmt` only issues LDLMS copies (or commits) and names none of `tiles`."""
    handles = {t.__chandle__() for t in tiles}
    bad = []

    def on_call(c: Any) -> None:
        if not isinstance(c.op, tvm.ir.Op) or str(c.op.name) in ("tl.access_ptr", "tirx.address_of"):
            return
        if str(c.op.name) != "tirx.call_extern" or not str(c.args[0].value).startswith(
                ("tl::cp_async_gs", "tl::cp_async_commit")):
            bad.append(c)

    tvm_ffi.structural_walk(stmt, [(tirx.Var, lambda v: bad.append(v) if v.__chandle__() in handles else None),
                                   (tirx.BufferStore, bad.append), (tvm.ir.Call, on_call)])
    return not bad


def _hoist_point(out: list, body: Any, tiles: list) -> int:
    """Where in `out` a region lowered to `body` (LDLMS copies into `tiles`) may issue and commit its copies: before
    the groups just committed by copies into other tiles (a pipeline's prefetch), so that waiting for the region's
    group leaves those in flight. len(out) where it stays. Safe for the waits already there: the region's group is
    then older than the groups it jumps, so a wait that covered one of those covers it too, and copies it jumps
    still belong to a group no older than before (a wait after them waits no less)."""
    if not out or not _is_commit(out[-1]) or not _async_copies_only(body, []):
        return len(out)
    on_chip = list(tiles)  # nor may the copies jumped over name a tile the region reads (an index tile)
    tvm_ffi.structural_walk(body, [(tirx.Var, lambda v: on_chip.append(v) if is_buffer(v) and scope_of(v) != "global"
                                    else None)])
    at = len(out)
    while at > 0 and _async_copies_only(out[at - 1], on_chip):
        at -= 1
    return at


def _lower_sequence(node: tirx.SeqStmt, mutator: Any) -> Any:
    """A sequence's regions lowered; where the compiler waits, the commit follows the nest and the wait goes just
    before the first later statement that needs the tiles (the end of the sequence at the latest), so the copies
    overlap the statements between. A region that follows groups of copies into other tiles (a T.Pipelined loop's
    prefetch of the next stages) issues and commits its copies before them, and its wait counts them
    (`tl::cp_async_wait<k>`, k the groups committed after its own): only the region's group and older ones are
    awaited, the prefetch stays in flight. The pipeline's own wait after it, where it covers the region's group,
    is the wait."""
    out, pending, after = [], [], 0  # after: groups committed after the newest pending region's
    for stmt in node.seq:
        if pending and _needs_the_tiles(stmt, pending):
            if not _covering_wait(stmt, after):
                out.append(wait_group(after))
            pending, after = [], 0
        if isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == PREFER_ASYNC_REGION:
            body, tiles = _lower_region(stmt)
            if not (tiles and as_int(stmt.value)):
                out.append(body)
                continue
            at = len(out) if pending else _hoist_point(out, body, tiles)
            jumped = out[at:]
            out[at:] = [body, commit_group(), *jumped]
            after = sum(_is_commit(s) for s in jumped)  # groups after the newest pending one: 0 behind another
            pending.extend(tiles)
            continue
        out.append(mutator.mutate(stmt))
    if pending:
        out.append(wait_group(after))
    return seq(out)


def lower_prefer_async_copies(func: tirx.PrimFunc) -> tirx.PrimFunc:
    def on_attr(node: tirx.AttrStmt, mutator: Any) -> Any:
        if node.attr_key != PREFER_ASYNC_REGION:
            return mutator.default_mutate(node)
        body, tiles = _lower_region(node)  # a region alone (a loop's whole body): commit and wait right after it
        return tirx.SeqStmt([body, commit_group(), wait_group(0)]) if tiles and as_int(node.value) else body

    body = tvm_ffi.structural_mutate(func.body, [(tirx.SeqStmt, _lower_sequence), (tirx.AttrStmt, on_attr)])
    return func if body.same_as(func.body) else func.with_body(body)


def MarkPreferAsyncLoops(configs: CompileOptions | dict):  # noqa: N802 - a pass, named as TVM names passes
    enable = CompileOptions.of(configs).enable_async_copy
    return tl_pass("MarkPreferAsyncLoops", lambda func: mark_prefer_async_loops(func, enable))


def LowerPreferAsyncCopies():  # noqa: N802 - a pass, named as TVM names passes
    return tl_pass("LowerPreferAsyncCopies", lower_prefer_async_copies)
