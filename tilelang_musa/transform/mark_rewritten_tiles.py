"""MarkRewrittenTiles: find the user's shared tiles that carry nothing from one iteration of a loop to the next, so
that PlanDynamicSharedMemory may count them in use only from their first to their last statement of each iteration
(and let another tile used elsewhere in the iteration have their bytes).

A tile qualifies when every statement that uses it sits inside one serial loop (the innermost holding them all) and,
in each iteration, the first of them writes it whole: a T.Parallel nest that stores every element (`KV_s[i, d] =
...`, or `if i < 16: s[i, d] = ...` over a 16-row tile; a T.copy or T.fill is such a nest by now), possibly as the
first statement of a serial loop inside that runs at least once. Its AllocBuffer gets REWRITTEN_ANNOTATION, the
loop's variable's name. Runs after the pipeline passes (a tile they give versions is written one version at a time: never
whole) and after the first LowerTileOp, before any layout is applied.
"""

from __future__ import annotations

import numpy as np
import tvm_ffi
from tvm import tirx

from ..ir.attrs import REWRITTEN_ANNOTATION, TEMPORARY_ANNOTATION
from ..ir.tile_views import shared_tile_views
from ..ir.utils import as_int, scope_of
from ..layout._expr import evaluate
from .pass_base import tl_pass

_SERIAL = (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED)
_MAX_POINTS = 1 << 22  # iterations a nest may have for its coverage to be counted


def _references(node, tile) -> bool:
    found: list = []
    tvm_ffi.structural_walk(node, [(tirx.Var, lambda v: found.append(v) if v.same_as(tile) else None)])
    return bool(found)


def _loops_around_uses(body, tile) -> list[tuple]:
    """For each statement using `tile` (AllocBuffers aside), the serial loops around it, outermost first."""
    stacks: list[tuple] = []

    def visit(node, loops: tuple) -> None:
        if isinstance(node, (tirx.AllocBuffer, tirx.DeclBuffer)):
            return
        if isinstance(node, tirx.SeqStmt):
            for stmt in node.seq:
                visit(stmt, loops)
        elif isinstance(node, tirx.For):
            if _references(node.min, tile) or _references(node.extent, tile):
                stacks.append(loops)
            serial = node.kind in _SERIAL and node.thread_binding is None
            visit(node.body, loops + (node,) if serial else loops)
        elif isinstance(node, tirx.IfThenElse):
            if _references(node.condition, tile):
                stacks.append(loops)
            visit(node.then_case, loops)
            if node.else_case is not None:
                visit(node.else_case, loops)
        elif isinstance(node, tirx.AttrStmt):
            if _references(node.value, tile):
                stacks.append(loops)
            visit(node.body, loops)
        elif _references(node, tile):
            stacks.append(loops)

    visit(body, ())
    return stacks


def _innermost_common_loop(stacks: list[tuple]):
    if not stacks:
        return None
    common = None
    for depth in range(min(len(s) for s in stacks)):
        if not all(s[depth].same_as(stacks[0][depth]) for s in stacks):
            break
        common = stacks[0][depth]
    return common


def _writes_whole(stmt, tile) -> bool:
    """`stmt` is a T.Parallel nest (constant extents from 0) storing `tile[...]` by the loop variables, under at most
    an `if` on them, and the stores reach every element of the tile."""
    loop_vars, extents = [], []
    while isinstance(stmt, tirx.For) and stmt.kind == tirx.ForKind.PARALLEL:
        if as_int(stmt.min) != 0 or as_int(stmt.extent) is None:
            return False
        loop_vars.append(stmt.loop_var)
        extents.append(as_int(stmt.extent))
        stmt = stmt.body
    condition = None
    if isinstance(stmt, tirx.IfThenElse) and stmt.else_case is None:
        condition, stmt = stmt.condition, stmt.then_case
    shape = [as_int(e) for e in tile.ty.shape]
    if not loop_vars or not isinstance(stmt, tirx.BufferStore) or not stmt.buffer.same_as(tile) or \
            _references(stmt.value, tile) or None in shape or int(np.prod(extents)) > _MAX_POINTS:
        return False
    points = np.indices(extents).reshape(len(extents), -1)
    env = dict(zip(loop_vars, points))
    try:
        made = np.ones(points.shape[1], dtype=bool) if condition is None else \
            np.broadcast_to(evaluate(condition, env) != 0, points.shape[1:])
        index = [np.broadcast_to(evaluate(e, env), points.shape[1:])[made] for e in stmt.indices]
    except (KeyError, TypeError, ValueError):  # an index or condition on more than the loop variables
        return False
    if len(index) != len(shape) or any(((i < 0) | (i >= n)).any() for i, n in zip(index, shape)):
        return False
    reached = np.zeros(int(np.prod(shape)), dtype=bool)
    reached[np.ravel_multi_index(tuple(index), shape)] = True
    return bool(reached.all())


def _first_use_writes_whole(stmt, tile) -> bool | None:
    """Whether the first statement that uses `tile` when `stmt` runs writes it whole (None: `stmt` does not use it)."""
    if not _references(stmt, tile) or isinstance(stmt, (tirx.AllocBuffer, tirx.DeclBuffer)):
        return None  # an allocation (a tile declared inside the loop, `T.alloc_shared` in its body) is no use
    if isinstance(stmt, tirx.SeqStmt):
        return next((r for r in (_first_use_writes_whole(s, tile) for s in stmt.seq) if r is not None), False)
    if _writes_whole(stmt, tile):
        return True
    if isinstance(stmt, tirx.For) and stmt.kind in _SERIAL and (as_int(stmt.extent) or 0) > 0 and \
            as_int(stmt.min) is not None:  # runs at least once: its first iteration's first use comes first
        return _first_use_writes_whole(stmt.body, tile) is True
    if isinstance(stmt, tirx.AttrStmt) and not _references(stmt.value, tile):
        return _first_use_writes_whole(stmt.body, tile) is True
    return False


def mark_rewritten_tiles(func: tirx.PrimFunc) -> tirx.PrimFunc:
    views = set(shared_tile_views(func.body).values())
    marked: dict = {}

    def consider(node) -> None:
        tile = node.buffer
        annotations = node.annotations or {}
        if scope_of(tile) not in ("shared", "shared.dyn") or TEMPORARY_ANNOTATION in annotations or \
                any(tile.same_as(v) for v in views):
            return
        loop = _innermost_common_loop(_loops_around_uses(func.body, tile))
        if loop is not None and _first_use_writes_whole(loop.body, tile):
            marked[tile] = loop.loop_var.name  # a name, not the variable: annotations reference no loop's var

    tvm_ffi.structural_walk(func.body, [(tirx.AllocBuffer, consider)])
    if not marked:
        return func

    def on_alloc(node, mutator):
        if node.buffer not in marked:
            return node
        return tirx.AllocBuffer(node.buffer, {**dict(node.annotations or {}), REWRITTEN_ANNOTATION: marked[node.buffer]})

    return func.with_body(tvm_ffi.structural_mutate(func.body, [(tirx.AllocBuffer, on_alloc)]))


def MarkRewrittenTiles():  # noqa: N802
    return tl_pass("MarkRewrittenTiles", mark_rewritten_tiles)
