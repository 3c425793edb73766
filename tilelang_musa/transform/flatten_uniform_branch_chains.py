"""Flatten `if c1: A elif c2: B else: C` chains whose conditions every thread of the block evaluates alike into
guarded statements of their own, for PlanDynamicSharedMemory:

    taken_1 = c1                       # bound once: later guards read the value the chain read
    if taken_1: A
    taken_2 = not taken_1 and c2       # short-circuit: c2 is evaluated exactly when the chain evaluated it
    if taken_2: B
    if not taken_1 and not taken_2: C

The shared-memory planner counts a statement of the tiles' block as a whole, so the tiles of every branch of a chain
were in use at once; each flattened `if` (without else, on a uniform condition) is a statement of its own, which the
finer plans open. So the tiles only one branch uses (a staged copy of each branch's gemm operand: sglang's two-cache
DeepSeek-V4 decode kernel stages Q once per cache) may share bytes, as they never hold a value at the same time. Each
condition is evaluated once, where and when the chain evaluated it, so a branch cannot change which one runs; a
condition some thread may evaluate differently (it reads a thread index) leaves its chain as it is.
"""

from __future__ import annotations

import tvm_ffi
from tvm import tirx

from .uniform_conditions import uniform_conditions


def flatten_uniform_branch_chains(body: tirx.Stmt) -> tirx.Stmt:
    """`body` with each uniform if/else chain that is a statement of a sequence spliced into it as guarded `if`s."""
    uniform = uniform_conditions(body)

    def on_seq(node, mutator):
        node = mutator.default_mutate(node)
        stmts, changed = [], False
        for stmt in node.seq:
            if _is_uniform_chain(stmt, uniform):
                stmts.extend(_flattened(stmt, None, uniform))
                changed = True
            else:
                stmts.append(stmt)
        return tirx.SeqStmt(stmts) if changed else node

    return tvm_ffi.structural_mutate(body, [(tirx.SeqStmt, on_seq)])


def _is_uniform_chain(stmt, uniform) -> bool:
    return isinstance(stmt, tirx.IfThenElse) and stmt.else_case is not None and uniform(stmt.condition)


def _flattened(chain: tirx.IfThenElse, not_taken, uniform) -> list:
    """The chain's branches as guarded statements; `not_taken`: the guard that no earlier branch ran (None: none)."""
    taken = tirx.Var("branch_taken", "bool")
    condition = chain.condition if not_taken is None else tirx.And(not_taken, chain.condition)
    stmts = [tirx.Bind(taken, condition), tirx.IfThenElse(taken, chain.then_case, None)]
    rest = tirx.Not(taken) if not_taken is None else tirx.And(not_taken, tirx.Not(taken))
    else_if = chain.else_case
    if isinstance(else_if, tirx.IfThenElse) and uniform(else_if.condition):
        if else_if.else_case is not None:
            return stmts + _flattened(else_if, rest, uniform)
        last = tirx.Var("branch_taken", "bool")
        return stmts + [tirx.Bind(last, tirx.And(rest, else_if.condition)),
                        tirx.IfThenElse(last, else_if.then_case, None)]
    return stmts + [tirx.IfThenElse(rest, else_if, None)]
