"""A region of part of the block cut at a barrier among its threads, for archs without such barriers (mp_21, mp_22).

ThreadSync may place a barrier inside `if tx >= 256:` (a real hazard between two parts of the region's body, or one
enumeration cannot disprove: an index that reads a load). mp_31 makes it a barrier over the range (RangeBarriers);
mp_22 has none. There the region is cut in two around a block barrier, which every thread reaches:

    if c: A; barrier; B    ->    if c: A / barrier / if c: B

This keeps the program's meaning when `c` has one value at both places (it reads no memory, only variables, which
nothing reassigns) and when B reads nothing A defines but bindings of pure expressions (no load, no call), which are
bound again before B. A loop around the barrier inside the region, `if c: for k: A; barrier; B`, is moved outside
the region when every thread would run it alike (its bounds read no thread index and no memory):
`for k: if c: A / barrier / if c: B`. Regions are cut innermost first, so a barrier cut out of an inner region may
cut the one around it. Anything else keeps its barrier inside the region, and RangeBarriers names it in an error.
Only barriers that would need such an error are cut: one among a single thread is dropped by RangeBarriers (program
order orders its accesses), the user's own T.sync_threads() stays as written, and a T.ws squad, which runs beside
the others (a block barrier would make them wait for each other), is not cut.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.attrs import USER_BLOCK_BARRIER
from ..ir.utils import TensorLoad, Var, seq, substitute
from .shared_memory_lifetimes import is_block_barrier
from .thread_guard import map_with_guards, reaching_threads, thread_conditions

# calls that compute a value from their operands and nothing else (the rest may read memory or have effects)
_PURE_CALLS = {"tirx.shift_left", "tirx.shift_right", "tirx.bitwise_and", "tirx.bitwise_or", "tirx.bitwise_xor",
               "tirx.bitwise_not", "tirx.if_then_else"}


def _is_compiler_barrier(stmt: Any) -> bool:
    """A block barrier `tvm_storage_sync("shared" | "shared.dyn")` that a pass placed (not the user's)."""
    return is_block_barrier(stmt) and (stmt.value.attrs is None or USER_BLOCK_BARRIER not in stmt.value.attrs)


def _pure(expr: Any) -> bool:
    """Whether `expr` reads no memory and calls nothing but arithmetic: its value is the same wherever it is taken."""
    impure = []

    def on_call(call: Any) -> None:
        if not (isinstance(call.op, tvm.ir.Op) and str(call.op.name) in _PURE_CALLS):
            impure.append(call)

    tvm_ffi.structural_walk(expr, [(TensorLoad, impure.append), (tvm.ir.Call, on_call)])
    return not impure


def _reads(node: Any) -> set:
    found: set = set()
    tvm_ffi.structural_walk(node, [(Var, lambda v: found.add(v.__chandle__()))])
    return found


def _mentions_any(expr: Any, vars_: list) -> bool:
    handles = {v.__chandle__() for v in vars_}
    return bool(_reads(expr) & handles)


def _uniform_loop(loop: Any, thread_vars: list) -> bool:
    """A serial loop whose trip count is the same for every thread: bounds of pure expressions of no thread index."""
    return all(_pure(e) and not _mentions_any(e, thread_vars) for e in (loop.min, loop.extent))


def _barrier_inside(stmt: Any, cut: set) -> bool:
    """A barrier to cut at the top level of `stmt`'s body (a loop's)."""
    stmts = stmt.seq if isinstance(stmt, tirx.SeqStmt) else [stmt]
    return any(s.__chandle__() in cut for s in stmts)


def _loads_unwritten(expr: Any, after: list) -> bool:
    """Whether the buffers `expr` loads are stored to nowhere in `after`."""
    loaded: list = []
    tvm_ffi.structural_walk(expr, [(TensorLoad, lambda load: loaded.append(load.source))])
    stored: list = []
    for stmt in after:
        tvm_ffi.structural_walk(stmt, [(tirx.BufferStore, lambda store: stored.append(store.buffer))])
    calls: list = []
    tvm_ffi.structural_walk(expr, [(tvm.ir.Call, lambda c: None if isinstance(c.op, tvm.ir.Op) and str(
        c.op.name) in _PURE_CALLS else calls.append(c))])
    return not calls and not any(a.same_as(b) for a in loaded for b in stored)


def _bound_again(bound: list, node: Any, ours: set) -> tuple[list, dict] | None:
    """The bindings of `bound` (var, value: in order) that `node` reads, through their values too, bound again to
    new variables (except those in `ours`, which `node` binds itself): (the Bind statements, old var -> new var);
    None if one of them reads memory (its value may have changed by then)."""
    reads = _reads(node)
    needed: set = set()
    for var, value in reversed(bound):  # a value may read an earlier binding: that one is needed too
        handle = var.__chandle__()
        if handle not in ours and (handle in reads or handle in needed):
            if not _pure(value):
                return None
            needed.add(handle)
            reads |= _reads(value)
    fresh: dict = {}
    binds = []
    for var, value in bound:
        if var.__chandle__() in needed:
            new = Var(var.name, var.ty)
            binds.append(tirx.Bind(new, substitute(value, fresh)))
            fresh[var] = new
    return binds, fresh


def _cut(condition: Any, body: Any, cut: set, thread_vars: list, keep: list) -> list | None:
    """The statements that `if condition: body` becomes, cut at its barriers in `cut`; None if it cannot be cut."""
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    pieces: list = []
    group: list = []
    bound: list = []  # (var, value) of the bindings met so far in the region's body, in order

    def close() -> bool:
        """Puts `group` under its own `if condition`, with the earlier bindings it reads bound again."""
        if all(isinstance(s, tirx.Bind) for s in group):
            group.clear()  # nothing but bindings: a later piece that reads them binds them again
            return True
        ours = {s.var.__chandle__() for s in group if isinstance(s, tirx.Bind)}
        again = _bound_again(bound, seq(group), ours)
        if again is None:
            return False
        binds, fresh = again
        pieces.append(tirx.IfThenElse(condition, seq(binds + [substitute(seq(group), fresh)]), None))
        group.clear()
        return True

    for k, stmt in enumerate(stmts):
        if stmt.__chandle__() in cut:
            # bindings right before the barrier load what nothing after it writes: they move past it (the load may
            # then see more writes of the region's threads, which the barrier orders, never another's later one)
            moved = []
            while group and isinstance(group[-1], tirx.Bind) and _loads_unwritten(group[-1].value, stmts[k + 1:]):
                moved.insert(0, group.pop())
                bound.pop()
            if not close():
                return None
            group.extend(moved)
            bound.extend((b.var, b.value) for b in moved)
            barrier = tirx.Evaluate(stmt.value)
            keep.append(barrier)  # (a barrier moved out may cut the region around it)
            cut.add(barrier.__chandle__())
            pieces.append(barrier)
            continue
        if isinstance(stmt, tirx.For) and _barrier_inside(stmt.body, cut) and _uniform_loop(stmt, thread_vars):
            if not close():
                return None
            # the loop outside, its body a region of its own, with the bindings it reads bound again inside it
            again = _bound_again(bound, stmt.body, set())
            if again is None:
                return None
            binds, fresh = again
            inner = _cut(condition, seq(binds + [substitute(stmt.body, fresh)]), cut, thread_vars, keep)
            if inner is None:
                return None
            pieces.append(tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, seq(inner), stmt.thread_binding,
                                   stmt.annotations, stmt.step))
            continue
        if isinstance(stmt, (tirx.AllocBuffer, tirx.DeclBuffer)):
            return None  # a buffer defined in the region: a later piece could not see it
        group.append(stmt)
        if isinstance(stmt, tirx.Bind):
            bound.append((stmt.var, stmt.value))
    if not close():
        return None
    return pieces


def split_regions_at_barriers(func: tirx.PrimFunc, threads: Any, analyzer: Any, stage: str) -> tirx.PrimFunc:
    """`func` with its regions of part of the block cut at the compiler's barriers among more than one of their
    threads (the module comment says when a cut keeps the program's meaning)."""
    thread_vars = [v for tag, v in threads.vars.items() if tag.startswith("threadIdx.")]
    cut: set = set()  # the handles of the barriers to cut out of their regions
    keep: list = []  # the barriers in `cut` (alive, so that their handles stay theirs)

    def on_evaluate(node, mutator, guards):
        if guards and not guards.ws and _is_compiler_barrier(node):  # (a T.ws squad runs beside the others)
            try:
                reach = reaching_threads(guards, threads, analyzer(), None, stage, "a barrier", None)
            except Exception:  # noqa: BLE001 - no range known at compile time: RangeBarriers says so
                return node
            if 1 < reach.count < threads.num_threads:
                keep.append(node)
                cut.add(node.__chandle__())
        return node

    map_with_guards(func.body, threads, lambda node, mutator, guards: mutator.default_mutate(node), on_evaluate)
    if not cut:
        return func

    def on_if(node, mutator):
        node = mutator.default_mutate(node)  # inner regions first
        if node.else_case is not None or not thread_conditions(node.condition, threads) \
                or not _pure(node.condition):
            return node
        body_stmts = node.then_case.seq if isinstance(node.then_case, tirx.SeqStmt) else [node.then_case]
        if not any(s.__chandle__() in cut or (isinstance(s, tirx.For) and _barrier_inside(s.body, cut))
                   for s in body_stmts):
            return node
        pieces = _cut(node.condition, node.then_case, cut, thread_vars, keep)
        return node if pieces is None else seq(pieces)

    return func.with_body(tvm_ffi.structural_mutate(func.body, [(tirx.IfThenElse, on_if)]))
