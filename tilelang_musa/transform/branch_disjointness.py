"""Branches whose threads reach disjoint elements of a shared scope: they need no barrier inside, whatever their
condition (upstream issue 1026: `if tx % 2 == 0: a = s[tx]; s[tx ^ 1] = a`).

TVM's barrier analysis takes two accesses of one buffer to conflict unless their indices are the same expression
of the thread index, so it wants a barrier between `s[tx]` and `s[tx ^ 1]`, and fails since the branch is divergent.
Under the branch's condition the even threads read even elements and write odd ones: no element is reached by two
threads. We decide that by enumeration, as only a prover of bitwise arithmetic could otherwise: with constant thread
extents and loop bounds, every (thread, element) each access of the branch reaches under the conditions around it
(the branch's, enclosing branches', loop ranges), over every iteration of the loops around it (each lane of a
vector access `s[Ramp(b, 1, n)]`); the branch is disjoint when no element is reached by two threads with one of
them writing. A condition around an access that enumeration cannot evaluate (it reads a load) counts as true:
more points, never fewer. A loop that neither the index nor the conditions of an access read only repeats the
same points, and is not enumerated, whatever its trip count (TileOPs' NSA top-k sorts one pool per chunk of a
run-time number of them); one only the conditions read, of a run-time extent, makes those conditions unknown. An
address handed to a callee is opaque only where it may point into the scope: `&counter[0]` of a global counter (an
atomic taking a tile in a persistent kernel's one-thread scheduler branch) hides no shared access, and the loads in
its index are seen as loads. Anything else (a load or a kernel parameter in an index, a run-time extent of a loop
the index reads, an address of the scope handed to a template, a view of a buffer (another name may reach its
elements), an `else` case whose threads run beside the `then` case's, more than _MAX_POINTS points) is not proven.
ThreadSync shows the accesses of a disjoint branch so where TVM's analysis fails in it, or puts a barrier inside a
branch a range of threads takes (`if tx < 2:` around a T.Parallel vectorized onto two threads: a barrier over part of
a warp, which no arch has).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.utils import TensorLoad, as_int, scope_of
from .shared_memory_lifetimes import is_block_barrier
from .uniform_conditions import THREAD_INVARIANT

_MAX_POINTS = 1 << 16  # thread x iteration points enumerated per branch, at most

_BINARY = {tirx.Add: operator.add, tirx.Sub: operator.sub, tirx.Mul: operator.mul,
           tirx.FloorDiv: operator.floordiv, tirx.FloorMod: operator.mod, tirx.Min: min, tirx.Max: max,
           tirx.EQ: operator.eq, tirx.NE: operator.ne, tirx.LT: operator.lt, tirx.LE: operator.le,
           tirx.GT: operator.gt, tirx.GE: operator.ge, tirx.BitwiseAnd: operator.and_,
           tirx.BitwiseOr: operator.or_, tirx.BitwiseXor: operator.xor, tirx.LShift: operator.lshift,
           tirx.RShift: operator.rshift}


class _NotConstant(Exception):
    """An expression reads something enumeration does not fix (a load, a parameter, a block index)."""


@dataclass(frozen=True)
class _Access:
    is_store: bool
    buffer: Any
    index: Any
    loops: tuple  # (var, min, extent) of every loop around it, outermost first
    conditions: tuple  # the conditions of the branches around it (negated for an else case)
    bindings: tuple  # (var, value) of the bindings in scope
    branches: tuple  # the `if` nodes around it


def disjoint_branches(body: Any, scope: str, thread_vars: dict[Any, int]) -> list[Any]:
    """The `if` nodes (no else case) of `body` inside which no two threads reach one `scope` element with one of
    them writing it. `thread_vars`: each thread index var -> its constant extent."""
    accesses: list[_Access] = []
    branches: list[tuple] = []  # (the `if`, the loops around it)
    opaque: set = set()  # branches that hand an address of the scope to a template: not analysed
    _collect(body, scope, (), (), (), (), accesses, branches, opaque)
    allocated: list = []  # a view (DeclBuffer) may share elements with another name: not analysed
    tvm_ffi.structural_walk(body, [(tirx.AllocBuffer, lambda n: allocated.append(n.buffer))])
    separated = _separated_loops(body)
    found = []
    for branch, loops in branches:
        if branch.else_case is not None or any(b.same_as(branch) for b in opaque):
            continue
        inside = [a for a in accesses if any(b.same_as(branch) for b in a.branches)]
        # a loop around the branch whose body has a block barrier outside it: one iteration's run of the branch is
        # ordered against the next one's by that barrier, so only the accesses of one iteration need be disjoint
        each_iteration = tuple(var for var, _, _ in loops if any(var.same_as(v) for v in separated))
        if inside and all(any(a.buffer.same_as(b) for b in allocated) for a in inside) and \
                _disjoint(inside, thread_vars, each_iteration):
            found.append(branch)
    return found


def _separated_loops(body: Any) -> list:
    """The variables of the loops whose body has a block barrier at its top level (run by every thread that runs the
    iteration, between any two iterations' other statements)."""
    found = []

    def on_for(node: Any) -> None:
        stmts = node.body.seq if isinstance(node.body, tirx.SeqStmt) else [node.body]
        if any(is_block_barrier(stmt) for stmt in stmts):
            found.append(node.loop_var)

    tvm_ffi.structural_walk(body, [(tirx.For, on_for)])
    return found


@dataclass(frozen=True)
class Context:
    """What surrounds a statement: the loops around it (var, min, extent), the conditions of the branches around it
    and the bindings in scope."""
    loops: tuple = ()
    conditions: tuple = ()
    bindings: tuple = ()


def contexts_of_sequences(body: Any) -> dict:
    """Each statement sequence of `body` (by handle) -> its Context."""
    found: dict = {}

    def visit(node: Any, context: Context) -> Context:
        if isinstance(node, tirx.SeqStmt):
            found[node.__chandle__()] = context
            for stmt in node.seq:
                context = visit(stmt, context)
            return context
        if isinstance(node, tirx.Bind):
            return Context(context.loops, context.conditions, context.bindings + ((node.var, node.value),))
        if isinstance(node, tirx.For):
            visit(node.body, Context(context.loops + ((node.loop_var, node.min, node.extent),), context.conditions,
                                     context.bindings))
            return context
        if isinstance(node, tirx.IfThenElse):
            visit(node.then_case, Context(context.loops, context.conditions + (node.condition,), context.bindings))
            if node.else_case is not None:
                visit(node.else_case, Context(context.loops, context.conditions + (tirx.Not(node.condition),),
                                              context.bindings))
            return context
        body = getattr(node, "body", None)
        if isinstance(body, tirx.Stmt):
            visit(body, context)
        return context

    visit(body, Context())
    return found


def thread_disjoint_writes(statements: list, buffer: Any, thread_vars: dict[Any, int],
                           context: Context | None = None) -> bool:
    """Whether no element of `buffer` is written by two threads over `statements` (run one after another by the same
    threads, in one iteration of the loops around them): each statement's own loops and conditions are enumerated,
    every thread of `thread_vars` counted that the conditions around them (`context`) admit, for each iteration of
    the loops around them on its own. An index reading anything else from outside them (a load, a run-time bound
    of a loop around them) is not proven."""
    context = context or Context()
    accesses: list[_Access] = []
    for stmt in statements:
        _collect(stmt, scope_of(buffer), context.loops, context.conditions, context.bindings, (), accesses, [],
                 set())
    stores = [a for a in accesses if a.is_store and a.buffer.same_as(buffer)]
    return bool(stores) and _disjoint(stores, thread_vars, tuple(var for var, _, _ in context.loops))


def _collect(node: Any, scope: str, loops: tuple, conditions: tuple, bindings: tuple, branches: tuple,
             out: list, all_branches: list, opaque: set) -> tuple:
    """Appends the `scope` accesses of `node` with their context; returns the bindings in scope after it."""
    if isinstance(node, tirx.SeqStmt):
        for stmt in node.seq:
            bindings = _collect(stmt, scope, loops, conditions, bindings, branches, out, all_branches, opaque)
        return bindings
    if isinstance(node, tirx.Bind):
        _note_expr(node.value, scope, loops, conditions, bindings, branches, out, opaque)
        return bindings + ((node.var, node.value),)
    if isinstance(node, tirx.For):
        bounds = (node.loop_var, node.min, node.extent)
        _collect(node.body, scope, loops + (bounds,), conditions, bindings, branches, out, all_branches, opaque)
        return bindings
    if isinstance(node, tirx.IfThenElse):
        _note_expr(node.condition, scope, loops, conditions, bindings, branches, out, opaque)
        all_branches.append((node, loops))
        inner = branches + (node,)
        _collect(node.then_case, scope, loops, conditions + (node.condition,), bindings, inner, out, all_branches,
                 opaque)
        if node.else_case is not None:
            _collect(node.else_case, scope, loops, conditions + (tirx.Not(node.condition),), bindings, inner, out,
                     all_branches, opaque)
        return bindings
    if isinstance(node, tirx.BufferStore):
        _note_expr(node.value, scope, loops, conditions, bindings, branches, out, opaque)
        if scope_of(node.buffer) == scope:
            out.append(_Access(True, node.buffer, _flat(node.indices), loops, conditions, bindings, branches))
        return bindings
    if isinstance(node, tirx.Evaluate):
        _note_expr(node.value, scope, loops, conditions, bindings, branches, out, opaque)
        return bindings
    body = getattr(node, "body", None)
    if isinstance(body, tirx.Stmt):
        _collect(body, scope, loops, conditions, bindings, branches, out, all_branches, opaque)
    return bindings


def _note_expr(expr: Any, scope: str, loops: tuple, conditions: tuple, bindings: tuple, branches: tuple,
               out: list, opaque: set) -> None:
    """The `scope` loads of `expr`; a call taking an address of the scope makes the branches around it opaque."""
    def on_load(load: Any) -> None:
        if scope_of(load.source) == scope:
            out.append(_Access(False, load.source, _flat(load.indices), loops, conditions, bindings, branches))

    def on_call(call: Any) -> None:
        if _hands_out_address(call, scope):
            opaque.update(branches)

    tvm_ffi.structural_walk(expr, [(TensorLoad, on_load), (tvm.ir.Call, on_call)])


def _hands_out_address(call: Any, scope: str) -> bool:
    """Whether `call` takes an address that may point into `scope` memory (its callee may reach any element there).
    The address of a global element (`T.atomic_add(counter[0], 1, return_prev=True)`'s `&counter[0]`) is not one:
    the loads in its index are seen as loads, as any other."""
    if not isinstance(call.op, tvm.ir.Op):
        return False
    name = str(call.op.name)
    if name == "tirx.address_of":
        target = call.args[0]
        return not isinstance(target, TensorLoad) or scope_of(target.source) == scope
    if name == "tirx.tvm_access_ptr":
        data = call.args[1]
        annotation = getattr(data, "type_annotation", None)
        return str(getattr(annotation, "storage_scope", scope)) == scope
    return name == "tl.access_ptr"  # (its address_of is looked at too; the marker says the callee reaches it)


def _flat(indices: Any) -> Any:
    indices = list(indices)
    return indices[0] if len(indices) == 1 else None  # ThreadSync runs on flat buffers


_ANY = object()  # an access that reads no variable of a loop taken one iteration at a time: in every iteration


def _disjoint(accesses: list[_Access], thread_vars: dict[Any, int], each_iteration: tuple = ()) -> bool:
    """No element reached by two threads with one writing, over every point of the accesses' domains; where
    `each_iteration` names loops around them, only points of one iteration of those loops are compared."""
    reached: dict = {}  # (buffer, element) -> {(iteration, thread, is_store)}
    budget = _MAX_POINTS
    threads = list(thread_vars.items())
    read_vars: dict = {}  # an expression's handle -> the variables it reads: the accesses share conditions, bounds
    try:
        for access in accesses:
            if access.index is None:
                return False
            for thread, env in _points(access, threads, read_vars):
                budget -= 1
                if budget < 0:
                    return False
                iteration = tuple(env.get(var, _ANY) for var in each_iteration)
                for element in _elements(access.index, env, access.bindings):
                    reached.setdefault((access.buffer, element), set()).add((iteration, thread, access.is_store))
    except _NotConstant:
        return False
    return all(_one_thread_or_reads(points) for points in reached.values())


def _one_thread_or_reads(points: set) -> bool:
    """Whether no two of one element's points, of one iteration, are of two threads with one of them writing."""
    if not any(is_store for _, _, is_store in points):
        return True
    if len({thread for _, thread, _ in points}) == 1:
        return True
    by_iteration: dict = {}
    for iteration, thread, is_store in points:
        by_iteration.setdefault(iteration, []).append((thread, is_store))
    if len(by_iteration) == 1 or not any(_ANY in it for it in by_iteration):
        return all(_one_thread_or_reads_alike(group) for group in by_iteration.values())
    keys = list(by_iteration)  # some points are in every iteration of a loop: compare the iterations that meet
    for a, first in enumerate(keys):
        for second in keys[a:]:
            if all(x is _ANY or y is _ANY or x == y for x, y in zip(first, second)):
                group = by_iteration[first] + (by_iteration[second] if second != first else [])
                if not _one_thread_or_reads_alike(group):
                    return False
    return True


def _one_thread_or_reads_alike(group: list) -> bool:
    return not any(is_store for _, is_store in group) or len({thread for thread, _ in group}) == 1


def _elements(index: Any, env: dict, bindings: tuple) -> list:
    """The elements an access reaches at one point: its index, or each lane of a vector access `Ramp(b, s, n)`."""
    if isinstance(index, tirx.Ramp):
        lanes = as_int(index.lanes)
        if lanes is None:
            raise _NotConstant
        base, stride = _eval(index.base, env, bindings), _eval(index.stride, env, bindings)
        return [base + lane * stride for lane in range(lanes)]
    return [_eval(index, env, bindings)]


def _reads(exprs: list, bindings: tuple, read_vars: dict | None = None) -> set:
    """The variables `exprs` read, through the bindings in scope (a bound variable's value is read too).
    `read_vars`: each walked expression's own variables by its handle, kept for the next call."""
    found: set = set()
    pending = list(exprs)
    while pending:
        expr = pending.pop()
        key = expr.__chandle__() if read_vars is not None else None
        seen = read_vars.get(key) if read_vars is not None else None
        if seen is None:
            seen = []
            tvm_ffi.structural_walk(expr, [(tvm.ir.Var, seen.append)])
            if read_vars is not None:
                read_vars[key] = seen
        for var in seen:
            if var not in found:
                found.add(var)
                pending += [value for bound, value in bindings if bound.same_as(var)]
    return found


def _enumerated_loops(access: _Access, read_vars: dict | None = None) -> tuple[set, set]:
    """(required, wanted): the loop variables the access's index reads (its elements depend on them: their bounds
    must be known), and those its conditions read besides (enumerated where their bounds are known; a condition
    over one that is not counts as true). A loop of neither only repeats the same points, whatever its trip count
    (a T.Pipelined loop over a run-time number of chunks around a sort of one shared tile)."""
    def closed(names: set) -> set:
        for var, lo, extent in reversed(access.loops):  # an enumerated loop's bounds read the loops outside it
            if var in names:
                names |= _reads([lo, extent], access.bindings, read_vars)
        return names

    required = closed(_reads([access.index], access.bindings, read_vars))
    wanted = closed(required | _reads(list(access.conditions), access.bindings, read_vars))
    return required, wanted


def _points(access: _Access, threads: list, read_vars: dict | None = None) -> Any:
    """(thread id, environment) for every thread and loop iteration at which `access` runs. Loops the access's
    index and conditions do not read are left out (the same points again), and so are loops only its conditions
    read whose bounds are not known (those conditions then count as true: more points, never fewer)."""
    envs = [({}, ())]
    for var, extent in threads:
        envs = [({**env, var: t}, tid + (t,)) for env, tid in envs for t in range(extent)]
    required, wanted = _enumerated_loops(access, read_vars)
    for var, lo, extent in access.loops:
        if var not in wanted:
            continue
        expanded = []
        for env, tid in envs:
            try:
                start, count = _eval(lo, env, access.bindings), _eval(extent, env, access.bindings)
            except _NotConstant:
                if var in required:
                    raise
                expanded = None
                break
            expanded += [({**env, var: v}, tid) for v in range(start, start + count)]
            if len(expanded) > _MAX_POINTS:
                raise _NotConstant
        if expanded is not None:
            envs = expanded
    for env, tid in envs:
        if all(_holds_or_unknown(c, env, access.bindings) for c in access.conditions):
            yield tid, env


def _holds_or_unknown(condition: Any, env: dict, bindings: tuple) -> bool:
    """A condition enumeration cannot evaluate (`if tile * 64 < valid_count:`, a load) is taken to hold: more
    points reached, never fewer, so a branch proven disjoint under it is disjoint whatever it says."""
    try:
        return bool(_eval(condition, env, bindings))
    except _NotConstant:
        return True


def _eval(expr: Any, env: dict, bindings: tuple) -> Any:
    if isinstance(expr, tirx.IntImm):
        return int(expr.value)
    if isinstance(expr, tvm.ir.Var):
        if expr in env:
            return env[expr]
        for var, value in reversed(bindings):
            if var.same_as(expr):
                return _eval(value, env, bindings)
        raise _NotConstant
    op = _BINARY.get(type(expr))
    if op is not None:
        a, b = _eval(expr.a, env, bindings), _eval(expr.b, env, bindings)
        if op in (operator.floordiv, operator.mod) and b == 0:
            raise _NotConstant
        return op(a, b)
    if isinstance(expr, tirx.And):
        return bool(_eval(expr.a, env, bindings)) and bool(_eval(expr.b, env, bindings))
    if isinstance(expr, tirx.Or):
        return bool(_eval(expr.a, env, bindings)) or bool(_eval(expr.b, env, bindings))
    if isinstance(expr, tirx.Not):
        return not _eval(expr.a, env, bindings)
    if isinstance(expr, tirx.Select):
        cond = _eval(expr.condition, env, bindings)
        return _eval(expr.true_value if cond else expr.false_value, env, bindings)
    if isinstance(expr, tirx.Cast) and str(expr.ty.dtype).startswith(("int", "uint", "bool")):
        value = _eval(expr.value, env, bindings)
        if str(expr.ty.dtype) == "bool":
            return bool(value)
        bits = expr.ty.dtype.bits
        low = -(1 << (bits - 1)) if str(expr.ty.dtype).startswith("int") else 0
        if not low <= value < low + (1 << bits):
            raise _NotConstant  # a cast that wraps
        return value
    if isinstance(expr, tvm.ir.Call) and isinstance(expr.op, tvm.ir.Op) and str(expr.op.name) == THREAD_INVARIANT:
        return _eval(expr.args[0], env, bindings)
    raise _NotConstant


def constant_thread_extents(threads: Any) -> dict[Any, int] | None:
    """Each threadIdx var -> its extent, or None if one is not a constant."""
    found = {}
    for tag, var in threads.vars.items():
        if tag.startswith("threadIdx."):
            extent = as_int(threads.extents[tag])
            if extent is None:
                return None
            found[var] = extent
    return found
