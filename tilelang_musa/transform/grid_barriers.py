"""Grid barriers (`T.sync_grid()`, `cooperative_groups::this_grid().sync()`): every thread of every block reaches each.

The grid barrier is a block barrier too (CUDA's and MUSA's grid.sync() starts and ends with one), so every thread of
the block must call it, the same number of times. Two passes keep it so:

CheckGridBarrierConditions, on the program as written: a T.sync_grid under the user's `if` on a thread or block index
lets some threads skip it, a deadlock on a card: a compile error naming the barrier's line and the condition.
(A condition on kernel scalars, or one that reads memory, may be the same for every thread: it stays, and a
simulated launch where it is not fails with a deadlock naming the barrier.)

SplitGuardsAtGridBarriers, once loops are partitioned among the threads and guarded (Flatten's output): a
T.Parallel body with a T.sync_grid is run by the threads its partition admits, `if tx < 64: {read; sync; write}`
for a 64-element loop on 128 threads, and threads 64..127 would never arrive. The guard is pushed past the barrier
instead, `if tx < 64: read`, `sync`, `if tx < 64: write`, so that every thread arrives as often as the loop runs:
inside the serial loops around it (each thread runs every iteration), with the bindings and allocations of the
guarded statements hoisted above (a binding that reads memory reads it only where the guard holds). The guards
split are the compiler's (partition and bounds guards: conditions that read no memory); a guard whose other
branch also waits at a grid barrier cannot be split and is a compile error.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError
from ..ir.ops import SYNC_GRID_OP
from ..ir.utils import TensorLoad, Var, loc_from_text, seq, thread_info
from .pass_base import tl_pass

STAGE = "GridBarriers"
_SERIAL_KINDS = (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED)


def _is_grid_barrier(node: Any) -> bool:
    call = node.value if isinstance(node, tirx.Evaluate) else node
    return isinstance(call, tvm.ir.Call) and isinstance(call.op, tvm.ir.Op) and str(call.op.name) == SYNC_GRID_OP


def _barriers(node: Any) -> list[Any]:
    found: list[Any] = []
    tvm_ffi.structural_walk(node, [(tvm.ir.Call, lambda c: found.append(c) if _is_grid_barrier(c) else None)])
    return found


def _loc(call: Any):
    attrs = getattr(call, "attrs", None)
    return loc_from_text(str(attrs["tl.loc"])) if attrs is not None and "tl.loc" in attrs else None


def _reads_memory(expr: Any) -> bool:
    found: list[Any] = []
    tvm_ffi.structural_walk(expr, [(TensorLoad, found.append)])
    return bool(found)


def _check_conditions(func: tirx.PrimFunc) -> tirx.PrimFunc:
    if not _barriers(func.body):
        return func
    index_vars = set(thread_info(func).vars.values())

    def on_if(node: Any) -> None:
        mentioned: list[Any] = []
        tvm_ffi.structural_walk(node.condition, [(Var, lambda v: mentioned.append(v) if v in index_vars else None)])
        barriers = _barriers(node.then_case) + ([] if node.else_case is None else _barriers(node.else_case))
        if mentioned and barriers and not _reads_memory(node.condition):
            raise CompileError(
                f"T.sync_grid() sits under `if {node.condition}`, a condition on the thread or block index "
                f"`{mentioned[0]}`: the threads it excludes never reach the grid barrier, which every thread of every "
                "block must reach (a deadlock on a card); move the barrier out of the `if`", _loc(barriers[0]), STAGE)

    tvm_ffi.structural_walk(func.body, [(tirx.IfThenElse, on_if)])
    return func


def CheckGridBarrierConditions():  # noqa: N802 - a pass, named as TVM names passes
    return tl_pass("CheckGridBarrierConditions", _check_conditions)


def _guarded_binding(cond: Any, stmt: Any) -> Any:
    """A binding hoisted out of `if cond`: its value read only where `cond` holds."""
    if not _reads_memory(stmt.value):
        return stmt
    return tirx.Bind(stmt.var, tirx.if_then_else(cond, stmt.value, tirx.const(0, stmt.value.ty.dtype)), stmt.span)


def _split(cond: Any, stmt: Any) -> list[Any]:
    """Statements equivalent to `if cond: stmt` in which every thread reaches each grid barrier of `stmt`."""
    if not _barriers(stmt):
        return [tirx.IfThenElse(cond, stmt, None)]
    if isinstance(stmt, tirx.Evaluate):  # the barrier itself
        return [stmt]
    if isinstance(stmt, tirx.SeqStmt):
        out: list[Any] = []
        pending: list[Any] = []  # guarded statements not yet emitted

        def flush() -> None:
            if pending:
                out.append(tirx.IfThenElse(cond, seq(list(pending)), None))
                pending.clear()

        for child in stmt.seq:
            if isinstance(child, (tirx.Bind, tirx.AllocBuffer, tirx.DeclBuffer)):
                flush()  # hoisted in place: it stays after the statements before it, in scope for those after
                out.append(_guarded_binding(cond, child) if isinstance(child, tirx.Bind) else child)
            elif _barriers(child):
                flush()
                out += _split(cond, child)
            else:
                pending.append(child)
        flush()
        return out
    if isinstance(stmt, tirx.For) and stmt.kind in _SERIAL_KINDS:
        return [tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, seq(_split(cond, stmt.body)),
                         stmt.thread_binding, stmt.annotations, stmt.step, stmt.span)]
    if isinstance(stmt, tirx.AttrStmt):  # an annotation of the statements it wraps: it wraps each piece
        return [tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, seq(_split(cond, stmt.body)))]
    if isinstance(stmt, tirx.IfThenElse) and not _reads_memory(stmt.condition):
        if stmt.else_case is None:
            return _split(tirx.And(cond, stmt.condition), stmt.then_case)
        if not _barriers(stmt.else_case):
            return _split(tirx.And(cond, stmt.condition), stmt.then_case) + \
                [tirx.IfThenElse(tirx.And(cond, tirx.Not(stmt.condition)), stmt.else_case, None)]
    raise CompileError(f"T.sync_grid() inside `{type(stmt).__name__}` under the guard `if {cond}`: the guard cannot "
                       "be moved past the grid barrier, which every thread of every block must reach; keep the "
                       "barrier out of branches and non-serial loops", _loc(_barriers(stmt)[0]), STAGE)


def _split_guards(func: tirx.PrimFunc) -> tirx.PrimFunc:
    if not _barriers(func.body):
        return func

    def on_if(node: Any, mutator: Any) -> Any:
        node = mutator.default_mutate(node)
        if not _barriers(node.then_case) or _reads_memory(node.condition) or \
                (node.else_case is not None and _barriers(node.else_case)):
            return node  # the user's condition (CheckGridBarrierConditions), or no barrier in the guarded branch
        out = _split(node.condition, node.then_case)
        if node.else_case is not None:
            out.append(tirx.IfThenElse(tirx.Not(node.condition), node.else_case, None))
        return seq(out)

    return func.with_body(tvm_ffi.structural_mutate(func.body, [(tirx.IfThenElse, on_if)]))


def SplitGuardsAtGridBarriers():  # noqa: N802 - a pass, named as TVM names passes
    return tl_pass("SplitGuardsAtGridBarriers", _split_guards)
