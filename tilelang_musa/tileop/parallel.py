"""Building the `T.Parallel` nests that SIMT tile ops lower to (later passes map them onto threads)."""

from __future__ import annotations

from typing import Any, Callable

from tvm import tirx

from ..errors import SourceLoc
from ..ir.attrs import COALESCED_WIDTH, PARALLEL, PARALLEL_LOOP_LAYOUT
from ..ir.utils import collect_accesses, scope_of


def parallel_nest(extents, body: Callable[[list[Any]], Any], loc: SourceLoc | None = None,
                  names: str = "ijklmn", coalesced_width: int | None = None, loop_layout: Any = None) -> Any:
    """`for i0, i1, ... in T.Parallel(*extents, coalesced_width=..., loop_layout=...): body([i0, i1, ...])`."""
    loop_vars = [tirx.Var(names[k] if k < len(names) else f"i{k}", "int32") for k in range(len(extents))]
    stmt = body(loop_vars)
    annotations = {PARALLEL: True}
    if loc is not None:
        annotations["tl.loc"] = str(loc)
    if coalesced_width is not None:
        annotations[COALESCED_WIDTH] = coalesced_width
    for k, (var, extent) in reversed(list(enumerate(zip(loop_vars, extents)))):
        level = {**annotations, PARALLEL_LOOP_LAYOUT: loop_layout} if k == 0 and loop_layout is not None else annotations
        stmt = tirx.For(var, 0, extent, tirx.ForKind.PARALLEL, stmt, None, level)
    return stmt


def thread_local_nest(extents, body: Callable[[list[Any]], Any], names: str = "ijklmn") -> Any:
    """The same iterations run by every thread on its own (serial loops): for ops on a thread's private
    (`local`) buffers, which the threads must not split among themselves."""
    loop_vars = [tirx.Var(names[k] if k < len(names) else f"i{k}", "int32") for k in range(len(extents))]
    stmt = body(loop_vars)
    for var, extent in reversed(list(zip(loop_vars, extents))):
        stmt = tirx.For(var, 0, extent, tirx.ForKind.SERIAL, stmt)
    return stmt


THREAD_PRIVATE_SCOPES = ("local", "local.var")


def writes_only_thread_private(body: Any) -> bool:
    """Whether a T.Parallel nest's body writes nothing but thread-private buffers: such a nest runs in full in every
    thread (each fills its own copy), where any other is split over the threads."""
    stores = [a for a in collect_accesses(body) if a.is_store]
    return bool(stores) and all(scope_of(a.buffer) in THREAD_PRIVATE_SCOPES for a in stores)
