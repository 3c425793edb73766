"""RangeBarriers: a barrier inside a region that only some of the block's threads reach covers those threads.

The barriers the compiler places (ThreadSync, SyncWriteAfterWrite, the ones around a gemm's template call or a
layout exchange) are block barriers, `tvm_storage_sync("shared")`. Inside a T.ws region or under `if tx < 128:`
the other threads never arrive, and a block barrier there deadlocks. Such a barrier becomes
`tvm_storage_sync("shared", id, count)`: a barrier over the `count` threads of that range (one id per range,
from 1; none where the range is one thread, whose accesses program order already orders), which LowerAsyncBarriers turns into an asynchronous barrier on mp_31/mp_32 (docs/ASYNC_MODEL.md). mp_21
and mp_22 have no barrier over part of a block: there the region is cut in two around a block barrier where that keeps
the program's meaning (split_regions_at_barriers.py: `if c: A; barrier; B` -> `if c: A / barrier / if c: B`), and a
barrier still inside is an error naming the region. A barrier under a
condition that is no range known at compile time is an error too, except the user's own T.sync_threads(): it
stays the block barrier it is written as (CUDA's __syncthreads, which every thread must reach), with a warning.

ThreadSync places barriers inside such regions only because thread_sync.py marks their conditions (a contiguous
range of thread ids known at compile time) as conditions every thread of the range evaluates alike. This pass also
drops the `tl.ws` markers of T.ws regions, which have served.

Between regions: a kernel whose regions wait on asynchronous barriers (`T.barrier_wait`, a producer / consumer
kernel) orders its regions itself, and a block barrier that the barrier passes put between two regions run by
disjoint threads (in a statement sequence, or from the end of a loop body to its next iteration's first region;
also where ThreadSync put it first in the second region's T.ws marker) is dropped: the producer squad would wait
there for consumers that are themselves waiting for the producer's next arrival (a deadlock). Without
asynchronous barriers such a block barrier stays: it is what orders the regions.
"""

from __future__ import annotations

import re
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError, SourceLoc
from ..diagnostics import warn_once
from ..ir.attrs import USER_BLOCK_BARRIER, WS_ATTR
from ..ir.ops import BARRIER_WAIT_OP
from ..ir.source_lines import user_line
from ..ir.utils import loc_from_text, loc_of, seq, thread_info
from ..target import arch_of, archs_with
from .partition_parallel_loop import thread_analyzer
from .pass_base import tl_pass
from .split_regions_at_barriers import split_regions_at_barriers
from .thread_guard import ThreadRange, conjuncts, map_with_guards, reaching_threads, thread_conditions

STAGE = "RangeBarriers"
STORAGE_SYNC = "tirx.tvm_storage_sync"


def block_barrier_scope(stmt: Any) -> str | None:
    """The scope of a block barrier `tvm_storage_sync("shared" | "shared.dyn")` (no id, no count), else None."""
    if not isinstance(stmt, tirx.Evaluate):
        return None
    call = stmt.value
    if not (isinstance(call, tvm.ir.Call) and isinstance(call.op, tvm.ir.Op) and str(call.op.name) == STORAGE_SYNC):
        return None
    scope = str(call.args[0].value) if isinstance(call.args[0], tvm.ir.expr.StringImm) else None
    return scope if scope in ("shared", "shared.dyn") and len(call.args) == 1 else None


def _waits_on_async_barriers(func: tirx.PrimFunc) -> bool:
    found = []

    def on_call(call):
        if isinstance(call.op, tvm.ir.Op) and str(call.op.name) == BARRIER_WAIT_OP:
            found.append(call)

    tvm_ffi.structural_walk(func.body, [(tvm.ir.Call, on_call)])
    return bool(found)


def _region(stmt: Any, threads, analyzer) -> ThreadRange | None:
    """The threads that run `stmt` if it is a region of part of the block (`if` on thread ids, maybe in a T.ws
    marker), else None."""
    while isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == WS_ATTR:
        stmt = stmt.body
    if isinstance(stmt, tirx.SeqStmt) and len(stmt.seq) == 2 and block_barrier_scope(stmt.seq[0]):
        stmt = stmt.seq[1]  # a barrier ThreadSync put first in the marker: the region is what follows it
    if not isinstance(stmt, tirx.IfThenElse) or stmt.else_case is not None:
        return None
    guards = thread_conditions(stmt.condition, threads)
    if len(guards) != len(conjuncts(stmt.condition)):
        return None
    try:
        reach = reaching_threads(guards, threads, analyzer(), None, STAGE)
    except CompileError:
        return None
    return None if reach.first == 0 and reach.count == threads.num_threads else reach


def _disjoint(a: ThreadRange | None, b: ThreadRange | None) -> bool:
    return a is not None and b is not None and (a.first + a.count <= b.first or b.first + b.count <= a.first)


def _without_leading_barrier(stmt: Any) -> Any | None:
    """A T.ws region whose marker's body starts with a block barrier (ThreadSync puts it there: it sits between
    the region and what ran before) without that barrier, else None."""
    if not (isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == WS_ATTR):
        return None
    body = stmt.body
    if isinstance(body, tirx.SeqStmt) and len(body.seq) >= 2 and block_barrier_scope(body.seq[0]):
        rest = seq(list(body.seq[1:]))
    else:
        rest = _without_leading_barrier(body)
        if rest is None:
            return None
    return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, rest)


def drop_barriers_between_regions(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """Block barriers between two regions of disjoint threads, in a kernel whose regions wait on asynchronous
    barriers (the module comment says why)."""
    if not _waits_on_async_barriers(func):
        return func
    threads = thread_info(func)
    analyzer = thread_analyzer(threads)

    def without_barrier_after(previous: Any, stmt: Any) -> Any | None:
        """`stmt` without its leading barrier if that barrier only separates it from `previous`, a region of
        disjoint threads."""
        stripped = _without_leading_barrier(stmt)
        if stripped is not None and _disjoint(_region(previous, threads, analyzer), _region(stripped, threads,
                                                                                            analyzer)):
            return stripped
        return None

    def on_seq(node, mutator):
        node = mutator.default_mutate(node)
        stmts = list(node.seq)
        keep = [k for k, stmt in enumerate(stmts)
                if not (block_barrier_scope(stmt) and 0 < k < len(stmts) - 1
                        and _disjoint(_region(stmts[k - 1], threads, analyzer),
                                      _region(stmts[k + 1], threads, analyzer)))]
        out = [stmts[k] for k in keep]
        changed = len(keep) != len(stmts)
        for k in range(1, len(out)):
            stripped = without_barrier_after(out[k - 1], out[k])
            if stripped is not None:
                out[k], changed = stripped, True
        return seq(out) if changed else node

    def on_for(node, mutator):
        node = mutator.default_mutate(node)
        body = node.body
        if not isinstance(body, tirx.SeqStmt) or len(body.seq) < 2:
            return node
        stmts = list(body.seq)
        # The loop-carried barrier, at the body's end (SyncWriteAfterWrite) or its start (ThreadSync, maybe inside
        # the first region's T.ws marker), sits between the last region of one iteration and the first of the next.
        if len(stmts) >= 3 and block_barrier_scope(stmts[-1]) and _disjoint(
                _region(stmts[-2], threads, analyzer), _region(stmts[0], threads, analyzer)):
            stmts = stmts[:-1]
        elif len(stmts) >= 3 and block_barrier_scope(stmts[0]) and _disjoint(
                _region(stmts[-1], threads, analyzer), _region(stmts[1], threads, analyzer)):
            stmts = stmts[1:]
        elif (stripped := without_barrier_after(stmts[-1], stmts[0])) is not None:
            stmts[0] = stripped
        else:
            return node
        return tirx.For(node.loop_var, node.min, node.extent, node.kind, seq(stmts), node.thread_binding,
                        node.annotations, node.step)

    return tvm_ffi.structural_mutate(func, [(tirx.SeqStmt, on_seq), (tirx.For, on_for)])


def _first_line(stmt: Any) -> str:
    """The first line of `stmt`'s script, without the declarations of the variables and buffers it uses."""
    for line in str(stmt).splitlines():
        if line.strip() and not re.match(r"^\w+ = T\.\w+\(", line):
            return line.strip() if len(line.strip()) <= 100 else line.strip()[:97] + "..."
    return str(stmt).strip()


def _barrier_sites(func: tirx.PrimFunc) -> list[tuple[Any, Any, Any]]:
    """(barrier statement, the statement after it or None, the source line last met before it) for every
    compiler-placed block barrier, in program order: the lines are those of loops and calls (tile ops, the user's
    barriers) that still carry one; the statements a T.Parallel became carry none."""
    sites: list = []
    last: list = [None]

    def note_calls(node: Any) -> None:
        def on_call(call: Any) -> None:
            if call.attrs is not None and "tl.loc" in call.attrs:
                last[0] = loc_from_text(str(call.attrs["tl.loc"]))
        tvm_ffi.structural_walk(node, [(tvm.ir.Call, on_call)])

    def visit(node: Any, following: Any) -> None:
        if isinstance(node, tirx.SeqStmt):
            stmts = list(node.seq)
            for k, stmt in enumerate(stmts):
                visit(stmt, stmts[k + 1] if k + 1 < len(stmts) else following)
            return
        if block_barrier_scope(node) is not None and node.value.attrs is None:
            sites.append((node, following, last[0]))
            return
        if isinstance(node, tirx.For):
            last[0] = loc_of(node) or last[0]
            visit(node.body, None)
            return
        if isinstance(node, tirx.IfThenElse):
            note_calls(node.condition)
            visit(node.then_case, None)
            if node.else_case is not None:
                visit(node.else_case, None)
            return
        body = getattr(node, "body", None)
        if isinstance(body, tirx.Stmt):
            visit(body, following)
            return
        note_calls(node)

    visit(func.body, None)
    return sites


def _guard_loc(guards) -> SourceLoc | None:
    """The user's line of the innermost `if` of `guards` that has one (a T.Parallel's thread guard carries the
    loop's), or None."""
    for span in reversed(guards.spans):
        line = user_line(span)
        if line is not None:
            return SourceLoc(line[0], line[1])
    return None


def _site_of(sites: list, node: Any, guards) -> tuple[str, Any]:
    """What a compiler-placed barrier orders, as words (the statement after it), and the source line to show: its
    guard's own, else the last one known before it."""
    for barrier, following, last_known in sites:
        if barrier.same_as(node):
            what = f", before `{_first_line(following)}`" if following is not None else ""
            loc = _guard_loc(guards)
            if loc is not None:
                return what, loc
            near = " (in the code after the line shown, the last one known at this stage)" if last_known else ""
            return what + near, last_known
    return "", _guard_loc(guards)


def range_barriers(func: tirx.PrimFunc) -> tirx.PrimFunc:
    func = drop_barriers_between_regions(func)
    threads = thread_info(func)
    target = func.attrs["target"] if func.attrs is not None and "target" in func.attrs else None
    arch = arch_of(target) if target is not None else None
    arch_name = arch.name if arch is not None else None
    partial_barriers = arch is not None and arch.has_async_barriers  # ASYNC_MODEL.md section 1
    analyzer = thread_analyzer(threads)
    if arch is not None and not partial_barriers:  # the region is cut at its barrier instead, where that keeps
        func = split_regions_at_barriers(func, threads, analyzer, STAGE)  # the program's meaning
    ids: dict[tuple[int, int], int] = {}
    original = func  # the nodes on_evaluate sees
    found_sites: list = []  # the barriers' sites, for an error only: walked when the first one is raised

    def sites() -> list:
        if not found_sites:
            found_sites.append(_barrier_sites(original))
        return found_sites[0]

    def on_evaluate(node, mutator, guards):
        scope = block_barrier_scope(node)
        if scope is None or not guards:
            return node
        try:
            reach = reaching_threads(guards, threads, analyzer(), None, STAGE, "a barrier", None)
        except CompileError:
            call = node.value
            if call.attrs is None or USER_BLOCK_BARRIER not in call.attrs:
                raise
            # the user's T.sync_threads under a condition that is no thread range (`if warp < n:`, n known at run
            # time): a block barrier, as written, which every thread of the block must reach (as __syncthreads)
            where = f"`if {' and '.join(str(g) for g in guards)}`"
            loc = str(call.attrs["tl.loc"]) if "tl.loc" in call.attrs else "a T.sync_threads()"
            warn_once(f"user block barrier {loc} {where}",
                      f"{loc}: T.sync_threads() under {where}, which is no range of thread ids known at compile "
                      "time, stays a block barrier (__syncthreads): every thread of the block must reach it, or the "
                      "block hangs on the device (the simulator reports it)")
            return node
        if reach.first == 0 and reach.count == threads.num_threads:
            return node
        if reach.count == 1:  # one thread's own accesses are ordered by program order: nothing to wait for
            return tirx.Evaluate(tirx.const(0, "int32"))
        if partial_barriers and reach.count % arch.warp_size == 0:
            barrier_id = ids.setdefault((reach.first, reach.count), len(ids) + 1)
            return tirx.Evaluate(tirx.call_intrin("int32", STORAGE_SYNC, scope, barrier_id, reach.count))
        site, loc = _site_of(sites(), node, guards)
        at = f" at {loc.filename}:{loc.lineno}" if loc is not None and loc == _guard_loc(guards) else ""
        where = guards.ws or f"`if {' and '.join(str(g) for g in guards)}`{at}"
        if not partial_barriers:
            raise CompileError(
                f"{where} needs a barrier among its {reach}{site} (the shared memory its threads write and read, or "
                f"a tile op's own barrier), but {arch_name} has no barrier over part of a block (asynchronous "
                f"barriers need {archs_with('has_async_barriers')[0]} or newer), and a block barrier there would "
                "wait for threads that never arrive. Move the shared-memory work out of the region, or run it on all "
                "the block's threads", loc, stage=STAGE)
        raise CompileError(
            f"{where} needs a barrier among its {reach}{site} (the shared memory its threads write and read, or "
            f"a tile op's own barrier), but a barrier over part of a block counts whole warps, and {reach.count} "
            f"threads is not a multiple of the warp size {arch.warp_size}. Run the shared-memory work on whole "
            "warps (a T.Parallel of a multiple of the warp size), or on all the block's threads", loc,
            stage=STAGE)

    func = map_with_guards(func, threads, lambda node, mutator, guards: mutator.default_mutate(node), on_evaluate)

    def on_attr(node, mutator):
        node = mutator.default_mutate(node)
        return node.body if node.attr_key == WS_ATTR else node

    return tvm_ffi.structural_mutate(func, [(tirx.AttrStmt, on_attr)])


def RangeBarriers():  # noqa: N802 - a pass, named as TVM names passes
    return tl_pass(STAGE, range_barriers)
