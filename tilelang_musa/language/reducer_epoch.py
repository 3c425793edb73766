"""The lifecycle rules of a reducer epoch (upstream main's reducer v2), checked while the kernel is traced, so
each error names the line that breaks them.

A reducer that any of `T.reducer_init`, `T.reducer_update` or `T.finalize_reducer(acc, dst)` touches is an epoch
reducer: exactly one init (not inside a T.Parallel loop); updates only between the init and the finalize, and only
inside a T.Parallel loop; exactly one finalize, with a destination, in the init's scope (the same loop iteration
and branch) or in a conditional nested inside it; and no other access at all: ordinary loads and stores
(`acc[i] += v`), T.fill / T.clear and T.copy are errors, as its per-thread partials have no value of their own
before the finalize combines them. A reducer none of the three touches keeps the legacy spelling (T.clear,
`acc[i] += v`, an in-place `T.finalize_reducer(acc)`); mixing the two spellings on one reducer is an error.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator

import tvm
import tvm_ffi

from ..errors import CompileError, SourceLoc
from .builder import KernelTrace, is_buffer

ALLOCATED, ACTIVE, FINALIZED = "allocated", "active", "finalized"
_PARALLEL_LOOPS = ("T.Parallel",)


class ReducerEpochError(CompileError):
    """A reducer used against its epoch's rules (module docstring)."""


@dataclass
class Epoch:
    state: str = ALLOCATED
    scopes: tuple = ()  # the control scopes (trace.scopes) open at the init
    init_loc: SourceLoc | None = None
    legacy: tuple[str, SourceLoc | None] | None = None  # the first access of the legacy spelling, if any
    internal: bool = False  # an epoch operation's own access is under way (internal_access)

    @property
    def is_epoch(self) -> bool:
        return self.state != ALLOCATED


def buffer_of(value: Any) -> Any:
    """The buffer behind a buffer, an element (`acc[i]`) or a region (`acc[0:4]`), else None."""
    return value if is_buffer(value) else getattr(value, "source", None)


def _error(trace: KernelTrace, message: str) -> ReducerEpochError:
    return ReducerEpochError(message, trace.loc)


def _at_line(loc: SourceLoc | None) -> str:
    return f" at line {loc.lineno}" if loc is not None else ""


def _in_parallel(trace: KernelTrace) -> bool:
    return any(loop is not None and loop.construct in _PARALLEL_LOOPS for loop in trace.loops)


def _enter_epoch_op(trace: KernelTrace, buf: Any, construct: str) -> Epoch:
    epoch = trace.reducer_epochs[buf]
    if epoch.legacy is not None:
        what, loc = epoch.legacy
        raise _error(trace, f"illegal mix on reducer `{buf.name}`: {construct} uses the reducer epoch spelling, but "
                     f"{what}{_at_line(loc)} already used the legacy one (T.clear / T.fill, "
                     "`acc[i] += v`, an in-place T.finalize_reducer(acc)); use one spelling per reducer: "
                     "T.reducer_init, T.reducer_update(acc[i], v), T.finalize_reducer(acc, dst)")
    return epoch


def open_epoch(trace: KernelTrace, buf: Any) -> None:
    """`T.reducer_init(buf)`: the epoch's one init, outside any T.Parallel loop."""
    epoch = _enter_epoch_op(trace, buf, "T.reducer_init")
    if _in_parallel(trace):
        raise _error(trace, f"T.reducer_init on reducer `{buf.name}` may not appear inside a T.Parallel loop: the "
                     "epoch opens once for the whole block")
    if epoch.state != ALLOCATED:
        raise _error(trace, f"double T.reducer_init on reducer `{buf.name}` (first{_at_line(epoch.init_loc)}); "
                     "each T.alloc_reducer supports exactly one epoch: allocate another reducer")
    epoch.state, epoch.scopes, epoch.init_loc = ACTIVE, tuple(trace.scopes), trace.loc


def note_update(trace: KernelTrace, buf: Any) -> None:
    """`T.reducer_update(buf[...], v)`: between the init and the finalize, inside a T.Parallel loop."""
    epoch = _enter_epoch_op(trace, buf, "T.reducer_update")
    if epoch.state == ALLOCATED:
        raise _error(trace, f"T.reducer_update on reducer `{buf.name}` before T.reducer_init: open the epoch first")
    if epoch.state == FINALIZED:
        raise _error(trace, f"T.reducer_update on reducer `{buf.name}` after T.finalize_reducer: its epoch is closed")
    if not _in_parallel(trace):
        raise _error(trace, f"T.reducer_update on reducer `{buf.name}` outside any T.Parallel loop: how many times a "
                     "thread-uniform update counts is ambiguous; wrap it in a T.Parallel loop")


def close_epoch(trace: KernelTrace, buf: Any, dst: Any) -> None:
    """`T.finalize_reducer(buf, dst)`: once, in the init's scope or a conditional nested in it."""
    epoch = _enter_epoch_op(trace, buf, "T.finalize_reducer(acc, dst)")
    dst_buf = buffer_of(dst)
    if dst_buf is not None and dst_buf in trace.reducers:
        raise _error(trace, f"T.finalize_reducer destination `{dst_buf.name}` must be an ordinary fragment, not a "
                     "reducer")
    if epoch.state == ALLOCATED:
        raise _error(trace, f"T.finalize_reducer on reducer `{buf.name}` before T.reducer_init")
    if epoch.state == FINALIZED:
        raise _error(trace, f"double T.finalize_reducer on reducer `{buf.name}`")
    opened, now = epoch.scopes, tuple(trace.scopes)
    if now[:len(opened)] != opened or any(not scope.conditional for scope in now[len(opened):]):
        raise _error(trace, f"T.finalize_reducer on reducer `{buf.name}` is not in the scope of its T.reducer_init "
                     f"({_at_line(epoch.init_loc).strip()}): the epoch must close in the same loop iteration and branch it "
                     "opened in, or in a conditional branch nested inside that scope")
    epoch.state = FINALIZED


def note_legacy_access(trace: KernelTrace, buf: Any, construct: str, store: bool) -> None:
    """An access of the legacy spelling (`construct`): an error on an epoch reducer, else remembered, so that a
    later epoch operation on the same reducer is one."""
    epoch = trace.reducer_epochs.get(buf)
    if epoch is None or epoch.internal:
        return
    if epoch.is_epoch:
        kind = "store to" if store else "use of"
        raise _error(trace, f"illegal {kind} reducer `{buf.name}` ({construct}): a reducer with an epoch "
                     "(T.reducer_init) is written only by T.reducer_update(acc[indices], value) and read only "
                     "through the destination of T.finalize_reducer(acc, dst); not by ordinary stores "
                     "(`acc[i] += v`), T.clear, T.fill or T.copy")
    if epoch.legacy is None:
        epoch.legacy = (construct, trace.loc)


@contextlib.contextmanager
def internal_access(trace: KernelTrace, buf: Any) -> Iterator[None]:
    """The epoch operations' own accesses (an update's read-modify-write, the finalize's copy into its
    destination): not a user's."""
    epoch = trace.reducer_epochs[buf]
    epoch.internal = True
    try:
        yield
    finally:
        epoch.internal = False


def check_reads(trace: KernelTrace, value: Any) -> None:
    """A value about to be stored must not read an epoch reducer: its partials are not the result."""
    if not isinstance(value, tvm.ir.Expr) or not any(e.is_epoch for e in trace.reducer_epochs.values()):
        return
    read: list = []

    def on_load(load: Any) -> None:
        epoch = trace.reducer_epochs.get(load.source)
        if epoch is not None and epoch.is_epoch and not epoch.internal:
            read.append(load.source)

    tvm_ffi.structural_walk(value, [(tvm.ir.expr.TensorLoad, on_load)])
    if read:
        raise _error(trace, f"illegal read of reducer `{read[0].name}`: a reducer has no readable value of its own; "
                     "read the destination of T.finalize_reducer(acc, dst) instead")


def check_all_closed(trace: KernelTrace) -> None:
    """At the end of the kernel function: every epoch that was opened was closed."""
    for buf, epoch in trace.reducer_epochs.items():
        if epoch.state == ACTIVE:
            raise ReducerEpochError(f"reducer `{buf.name}` is initialized but never finalized; call "
                                    "T.finalize_reducer(acc, dst) exactly once after its updates", epoch.init_loc)
