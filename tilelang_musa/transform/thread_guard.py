"""Which threads reach a statement: the range of the block's linear thread id that the enclosing `if`s allow.

A `T.Parallel` nest is split among the threads that run it. Under `if tx < 128:` in a 256-thread block only
threads 0..127 get there, so the nest must be split among those 128 (`thread - 0`, 128 threads), not among all
256, or half of its iterations are never run. The guards must admit exactly a contiguous range of thread ids known
at compile time; anything else (`tx % 2 == 0`, `tx < n` with a runtime n) cannot be split statically and is an
error naming the loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm_ffi
from tvm import tirx

from ..errors import CompileError
from .ir_utils import ThreadInfo, Var, loc_of


@dataclass(frozen=True)
class ThreadRange:
    first: int  # the lowest linear thread id that reaches the statement
    count: int  # how many consecutive threads do


def _conjuncts(cond: Any) -> list[Any]:
    if isinstance(cond, tirx.And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
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

    return [c for c in _conjuncts(cond) if mentions_threads(c)]


def reaching_threads(guards: list[Any], threads: ThreadInfo, analyzer: Any, loop: Any, stage: str) -> ThreadRange:
    """The contiguous range of linear thread ids admitted by `guards` (conditions on thread indices)."""
    if not guards:
        return ThreadRange(0, threads.num_threads)
    tid = threads.linear_thread_id()
    cond = guards[0]
    for g in guards[1:]:
        cond = tirx.And(cond, g)
    with analyzer.constraint_scope(cond):
        bound = analyzer.const_int_bound(tid)
    first, last = int(bound.min_value), int(bound.max_value)
    exact = first <= last
    if exact:
        with analyzer.constraint_scope(tirx.And(tid >= first, tid <= last)):
            exact = analyzer.can_prove(cond)
    if not exact:
        raise CompileError(
            f"T.Parallel under `if {cond}`: a parallel loop is split among the threads that run it, which must be a "
            "contiguous range of thread ids known at compile time, and this condition does not give one. Use "
            "T.serial for a loop every admitted thread runs in full, or guard with a range such as `tx < 128`",
            loc_of(loop), stage)
    return ThreadRange(first, last - first + 1)


def map_with_guards(stmt: Any, threads: ThreadInfo, on_for) -> Any:
    """structural_mutate of `stmt` with `on_for(node, mutator, guards)`, where `guards` are the thread conditions of
    the `if`s (and `else`s) around the loop."""
    guards: list[Any] = []

    def on_if(node, mutator):
        conds = thread_conditions(node.condition, threads)
        if not conds:
            return mutator.default_mutate(node)
        guards.extend(conds)
        then_case = mutator.mutate(node.then_case)
        del guards[len(guards) - len(conds):]
        else_case = node.else_case
        if else_case is not None:
            guards.append(tirx.Not(node.condition))
            else_case = mutator.mutate(else_case)
            guards.pop()
        if then_case.same_as(node.then_case) and (else_case is None or else_case.same_as(node.else_case)):
            return node
        return tirx.IfThenElse(node.condition, then_case, else_case)

    return tvm_ffi.structural_mutate(
        stmt, [(tirx.IfThenElse, on_if), (tirx.For, lambda node, mutator: on_for(node, mutator, list(guards)))])
