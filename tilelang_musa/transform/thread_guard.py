"""Which threads reach a statement: the range of the block's linear thread id that the enclosing `if`s allow.

A `T.Parallel` nest is split among the threads that run it. Under `if tx < 128:` in a 256-thread block only
threads 0..127 get there, so the nest must be split among those 128 (`thread - 0`, 128 threads), not among all
256, or half of its iterations are never run. Tile ops (T.gemm, T.reduce_*, ...) and the fragments they use are
laid out and lowered the same way, for the threads that reach them (a `T.ws` region is such an `if`). The guards
must admit exactly a contiguous range of thread ids known at compile time; anything else (`tx % 2 == 0`, `tx < n`
with a runtime n, `T.ws(0, 2)`) cannot be split statically and is an error naming the loop or op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError
from ..ir.attrs import WS_ATTR
from ..ir.utils import ThreadInfo, Var, loc_of


@dataclass(frozen=True)
class ThreadRange:
    first: int  # the lowest linear thread id that reaches the statement
    count: int  # how many consecutive threads do

    def __str__(self) -> str:
        return f"threads {self.first}..{self.first + self.count - 1}"


class Guards(list):
    """The thread conditions around a statement, innermost last; `ws` names the innermost T.ws region, if any;
    `spans` are the spans of the `if`s that set them, innermost last (for errors that name the user's line)."""

    ws: str | None = None
    spans: tuple = ()


def conjuncts(cond: Any) -> list[Any]:
    if isinstance(cond, tirx.And):
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [cond]


def thread_conditions(cond: Any, threads: ThreadInfo) -> list[Any]:
    """The conjuncts of `cond` that read a thread index (the others do not change which threads get there).
    Block indices do not count: a condition on them alone (`if bx * 8 + r < n`) admits all of a block's threads
    or none."""
    thread_vars = {v for tag, v in threads.vars.items() if tag.startswith("threadIdx.")}

    def mentions_threads(expr: Any) -> bool:
        found: list[Any] = []
        tvm_ffi.structural_walk(expr, [(Var, lambda v: found.append(v) if v in thread_vars else None)])
        return bool(found)

    return [c for c in conjuncts(cond) if mentions_threads(c)]


_NEGATED = {tirx.LT: tirx.GE, tirx.LE: tirx.GT, tirx.GT: tirx.LE, tirx.GE: tirx.LT, tirx.EQ: tirx.NE,
            tirx.NE: tirx.EQ}


def push_negations(cond: Any, negate: bool = False) -> Any:
    """`cond` with its negations moved onto the comparisons (`not tx < 256` -> `tx >= 256`, De Morgan over and /
    or), the form the analyzer reads bounds from: an `elif` branch's guard is the negation of the `if` before it."""
    if isinstance(cond, tirx.Not):
        return push_negations(cond.a, not negate)
    if isinstance(cond, (tirx.And, tirx.Or)):
        a, b = push_negations(cond.a, negate), push_negations(cond.b, negate)
        return (tirx.Or if isinstance(cond, tirx.And) == negate else tirx.And)(a, b)
    if negate and type(cond) in _NEGATED:
        return _NEGATED[type(cond)](cond.a, cond.b)
    return tirx.Not(cond) if negate else cond


def reaching_threads(guards: list[Any], threads: ThreadInfo, analyzer: Any, loop: Any, stage: str,
                     construct: str = "T.Parallel", loc: Any = None) -> ThreadRange:
    """The contiguous range of linear thread ids admitted by `guards` (conditions on thread indices).
    `construct` and `loc` name the loop or tile op in the error (by default the T.Parallel `loop`)."""
    if not guards:
        return ThreadRange(0, threads.num_threads)
    tid = threads.linear_thread_id()
    cond = push_negations(guards[0])
    for g in guards[1:]:
        cond = tirx.And(cond, push_negations(g))
    with analyzer.constraint_scope(cond):
        bound = analyzer.const_int_bound(tid)
    first, last = int(bound.min_value), int(bound.max_value)
    exact = first <= last
    if exact:
        with analyzer.constraint_scope(tirx.And(tid >= first, tid <= last)):
            exact = analyzer.can_prove(cond)
    if not exact:
        loc = loc if loc is not None else loc_of(loop)
        where = f"inside {guards.ws}" if getattr(guards, "ws", None) else f"under `if {cond}`"
        if construct == "T.Parallel":
            raise CompileError(
                f"T.Parallel {where}: a parallel loop is split among the threads that run it, which must be a "
                "contiguous range of thread ids known at compile time, and this condition does not give one. Use "
                "T.serial for a loop every admitted thread runs in full, or guard with a range such as `tx < 128`",
                loc, stage)
        if construct == "a barrier":
            raise CompileError(
                f"a barrier {where} (a T.sync_threads, or one the compiler needs there) would cover the threads that "
                "reach it, which must be a contiguous range of thread ids known at compile time, and this condition "
                "does not give one. Move the barrier (or the shared-memory work that needs it) out of the branch",
                loc, stage)
        raise CompileError(
            f"{construct} {where}: a tile op is laid out and run on the threads that reach it, which must be a "
            "contiguous range of thread ids known at compile time (contiguous squads, e.g. T.ws(0, 1), or a guard "
            "such as `tx < 128`), and this condition does not give one", loc, stage)
    return ThreadRange(first, last - first + 1)


def map_with_guards(stmt: Any, threads: ThreadInfo, on_for, on_evaluate=None, on_store=None) -> Any:
    """structural_mutate of `stmt` with `on_for(node, mutator, guards)` (and `on_evaluate` / `on_store`, if given,
    likewise for Evaluate / BufferStore, Bind and LetStmt statements), where `guards` (a Guards) are the thread conditions of the `if`s (and `else`s) around
    the statement."""
    guards = Guards()

    def on_attr(node, mutator):
        if node.attr_key != WS_ATTR:
            return mutator.default_mutate(node)
        outer, guards.ws = guards.ws, str(node.value.value)
        try:
            return mutator.default_mutate(node)
        finally:
            guards.ws = outer

    def snapshot() -> Guards:
        copy = Guards(guards)
        copy.ws, copy.spans = guards.ws, guards.spans
        return copy

    def on_if(node, mutator):
        conds = thread_conditions(node.condition, threads)
        if not conds:
            return mutator.default_mutate(node)
        guards.extend(conds)
        outer_spans, guards.spans = guards.spans, guards.spans + (node.span,)
        then_case = mutator.mutate(node.then_case)
        del guards[len(guards) - len(conds):]
        else_case = node.else_case
        if else_case is not None:
            # `not (tx < 960)` simplified to `960 <= tx`: the analyzer bounds the thread id by the latter only
            guards.append(tvm.sym.Analyzer().simplify(tirx.Not(node.condition)))
            else_case = mutator.mutate(else_case)
            guards.pop()
        guards.spans = outer_spans
        if then_case.same_as(node.then_case) and (else_case is None or else_case.same_as(node.else_case)):
            return node
        return tirx.IfThenElse(node.condition, then_case, else_case)

    handlers = [(tirx.IfThenElse, on_if), (tirx.AttrStmt, on_attr),
                (tirx.For, lambda node, mutator: on_for(node, mutator, snapshot()))]
    if on_evaluate is not None:
        handlers.append((tirx.Evaluate, lambda node, mutator: on_evaluate(node, mutator, snapshot())))
    if on_store is not None:  # also the statements that bind a value: Bind, LetStmt
        for kind in (tirx.BufferStore, tirx.Bind, tirx.LetStmt):
            handlers.append((kind, lambda node, mutator: on_store(node, mutator, snapshot())))
    return tvm_ffi.structural_mutate(stmt, handlers)
