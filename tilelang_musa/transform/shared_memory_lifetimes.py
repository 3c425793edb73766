"""When each shared tile is in use, over the statements of the block that allocates the tiles (for
PlanDynamicSharedMemory, which lets tiles whose uses do not overlap share bytes).

The unit is one statement of that block, the innermost SeqStmt holding the tiles' AllocBuffer statements: a loop, a
branch or a nest counts as a whole, so a tile used anywhere inside a loop is live for all of it (values carried from one
iteration to the next stay safe). A statement that issues a TME store without waiting for it leaves its tiles
being read after it ends: they stay in use to the end of the block. Every thread runs these statements, so a block-wide barrier placed between two of
them orders all accesses before it against all after it. A view of a tile as another dtype (ir/tile_views.py) is the
tile's bytes: a statement that references the view uses the tile.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.tile_views import shared_tile_views
from ..tileop.tme_copy import TME_STORE, TME_STORE_WAIT
from .uniform_conditions import uniform_conditions

STORAGE_SYNC = "tirx.tvm_storage_sync"
UNUSED = (1 << 62, -1)  # the span of a tile nothing references: it overlaps no other span


@dataclass(frozen=True)
class Lifetimes:
    seq: tirx.SeqStmt  # the statements the indices count
    spans: dict  # tile -> (first, last) index of the statements that reference it
    barriers: tuple[int, ...]  # indices of block-wide barriers among the statements


def _called_ops(stmt: tirx.Stmt) -> set[str]:
    found: set[str] = set()
    tvm_ffi.structural_walk(stmt, [(tvm.ir.Call, lambda c: found.add(str(getattr(c.op, "name", ""))))])
    return found


def _referenced_vars(stmt: tirx.Stmt, views: dict) -> set:
    """The variables `stmt` references, a view of a tile (in `views`: view -> tile) as the tile."""
    found: set = set()
    tvm_ffi.structural_walk(stmt, [(tvm.ir.expr.Var, lambda v: found.add(v))])
    return {views.get(v, v) for v in found} if views else found


def is_block_barrier(stmt: tirx.Stmt) -> bool:
    """`tvm_storage_sync("shared"[.dyn])` over the whole block (no barrier id, no thread count)."""
    call = stmt.value if isinstance(stmt, tirx.Evaluate) else None
    return (isinstance(call, tvm.ir.Call) and str(getattr(call.op, "name", "")) == STORAGE_SYNC
            and len(call.args) == 1)


def block_barrier() -> tirx.Stmt:
    return tirx.Evaluate(tirx.call_intrin("int32", STORAGE_SYNC, "shared"))


def tile_lifetimes(body: tirx.Stmt, allocs: list, within_uniform_branch: bool = False) -> Lifetimes | None:
    """The lifetimes of the tiles `allocs` allocates (AllocBuffer nodes), over the statements of the innermost SeqStmt
    holding all of them (a tile allocated inside one of its statements, say a reduction's scratch inside a loop, is
    in use during that statement), or None when no SeqStmt holds them all (then no tile may share bytes with another).
    A tile no statement references has span UNUSED. With `within_uniform_branch`, where every use is inside one
    statement that is an `if` without else whose condition all threads evaluate alike, over the statements of its
    body instead (repeatedly): a barrier placed between two of them is still reached by every thread."""
    seq = _innermost_seq_holding(body, allocs)
    if seq is None:
        return None
    tiles = [a.buffer for a in allocs]
    views = shared_tile_views(body)
    if within_uniform_branch:
        seq = _inside_uniform_branch(seq, tiles, uniform_conditions(body), views)
    spans: dict = {}
    barriers = []
    for index, stmt in enumerate(seq.seq):
        if isinstance(stmt, tirx.AllocBuffer):
            continue
        if is_block_barrier(stmt):
            barriers.append(index)
        ops = _called_ops(stmt)
        last = len(seq.seq) - 1 if TME_STORE in ops and TME_STORE_WAIT not in ops else index
        for var in _referenced_vars(stmt, views):
            if var in spans:
                spans[var] = (spans[var][0], max(spans[var][1], last))
            elif any(var.same_as(t) for t in tiles):
                spans[var] = (index, last)
    for tile in tiles:  # referenced by no statement: never accessed, in use nowhere
        spans.setdefault(tile, UNUSED)
    return Lifetimes(seq, spans, tuple(barriers))


def _inside_uniform_branch(seq: tirx.SeqStmt, tiles: list, uniform, views: dict) -> tirx.SeqStmt:
    while True:
        using = [stmt for stmt in seq.seq if not isinstance(stmt, tirx.AllocBuffer)
                 and any(any(var.same_as(t) for t in tiles) for var in _referenced_vars(stmt, views))]
        if len(using) != 1:
            return seq
        branch = using[0]
        if not isinstance(branch, tirx.IfThenElse) or branch.else_case is not None or \
                not isinstance(branch.then_case, tirx.SeqStmt) or not uniform(branch.condition):
            return seq
        seq = branch.then_case


def _innermost_seq_holding(body: tirx.Stmt, allocs: list) -> tirx.SeqStmt | None:
    wanted = [a.buffer for a in allocs]
    best: list = [None]

    def holds_all(seq: tirx.SeqStmt) -> bool:
        found: set = set()
        tvm_ffi.structural_walk(seq, [(tirx.AllocBuffer, lambda a: found.add(a.buffer))])
        return all(any(t.same_as(f) for f in found) for t in wanted)

    def visit(seq):  # the seqs holding them all are nested in one another, and walked outermost first
        if holds_all(seq):
            best[0] = seq

    tvm_ffi.structural_walk(body, [(tirx.SeqStmt, visit)], order="pre")
    return best[0]
