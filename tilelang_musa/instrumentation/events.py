"""Pass events: a TVM PassInstrument that pairs each pass's before/after callbacks into one event.

`StackedPassInstrument(observer)` keeps a stack of the passes running (a pass run inside another pass is nested one
level deeper), gives each observed pass a `PassEvent` (its name, start order, depth, the enclosing observed pass and
the phase label of `pass_phase`), and calls the observer's `pass_started` / `pass_finished` around it. A pass that
raises never gets its after-callback: the open frames reach the observer's `passes_incomplete` when the PassContext
exits (or at the first callback out of order). Tools (pass timing, traces) are observers; what they record is theirs.
This is upstream TileLang's `tilelang.instrumentation` event layer, over the same TVM callbacks, so tools written
against it run on MUSA's pipeline (transform/pipeline.py runs every pass under one PassContext per kernel).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from tvm.ir.instrument import pass_instrument

CapturePredicate = Callable[[str, int], bool]  # (pass name, depth) -> observe it?
SequenceAllocator = Callable[[], int]  # the next sequence number, for numbering shared over several PassContexts

_phase: ContextVar[str | None] = ContextVar("tilelang_musa_pass_phase", default=None)
_active: ContextVar[tuple["StackedPassInstrument", ...]] = ContextVar("tilelang_musa_stacked_instruments",
                                                                      default=())


@contextmanager
def pass_phase(name: str | None) -> Iterator[None]:
    """Label the pass events of the body with `name` (None: no label)."""
    token = _phase.set(None if name is None else str(name))
    try:
        yield
    finally:
        _phase.reset(token)


def current_pass_phase() -> str | None:
    return _phase.get()


def active_stacked_pass_instruments() -> tuple["StackedPassInstrument", ...]:
    """The StackedPassInstruments whose PassContext is entered now, in the order they entered."""
    return _active.get()


@dataclass(frozen=True)
class PassEvent:
    name: str
    sequence: int
    depth: int
    parent_sequence: int | None  # the innermost enclosing pass that was observed
    phase: str | None


@dataclass(frozen=True)
class IncompletePass:
    """A pass that started and never finished (it raised, or its callbacks came out of order)."""

    name: str
    depth: int
    event: PassEvent | None  # None: the pass was not observed (nested, or the predicate said no)
    state: Any


class PassEventObserver:
    """What a tool implements; every hook does nothing by default."""

    def enter_pass_context(self) -> None:
        pass

    def exit_pass_context(self) -> None:
        pass

    def pass_started(self, mod: Any, event: PassEvent) -> Any:
        """Called before the pass; what it returns comes back to `pass_finished` as `state`."""
        return None

    def pass_finished(self, mod: Any, event: PassEvent, state: Any) -> None:
        pass

    def passes_incomplete(self, passes: Sequence[IncompletePass], error: BaseException | None) -> None:
        pass

    def callback_mismatch(self, actual: str, expected: str | None) -> None:
        pass


@dataclass
class _Frame:
    name: str
    depth: int
    event: PassEvent | None
    state: Any = None


@pass_instrument
class StackedPassInstrument:
    """The PassInstrument: `capture_nested=False` observes only the passes the pipeline calls itself (depth 0),
    `capture_predicate(name, depth)` filters further, `sequence_allocator` numbers events across PassContexts
    (without it each PassContext counts from 0), `phase_provider` labels them (default: `pass_phase`'s label)."""

    def __init__(self, observer: PassEventObserver, *, capture_nested: bool = True,
                 capture_predicate: CapturePredicate | None = None,
                 sequence_allocator: SequenceAllocator | None = None,
                 phase_provider: Callable[[], str | None] = current_pass_phase) -> None:
        self.observer = observer
        self.capture_nested = capture_nested
        self.capture_predicate = capture_predicate
        self.sequence_allocator = sequence_allocator
        self.phase_provider = phase_provider
        self._frames: list[_Frame] = []
        self._count = 0

    @property
    def pending_events(self) -> tuple[PassEvent, ...]:
        """The observed passes running now, outermost first."""
        return tuple(f.event for f in self._frames if f.event is not None)

    def _next_sequence(self) -> int:
        if self.sequence_allocator is not None:
            return self.sequence_allocator()
        self._count += 1
        return self._count - 1

    def _observes(self, name: str, depth: int) -> bool:
        if depth > 0 and not self.capture_nested:
            return False
        return self.capture_predicate is None or bool(self.capture_predicate(name, depth))

    def _leave(self) -> None:
        # TVM exits a context's instruments in the order they entered, not in reverse: remove this one by identity.
        active = list(_active.get())
        for i in reversed(range(len(active))):
            if active[i] is self:
                del active[i]
                break
        _active.set(tuple(active))

    def enter_pass_ctx(self) -> None:
        self._frames.clear()
        self._count = 0
        _active.set((*_active.get(), self))
        try:
            self.observer.enter_pass_context()
        except BaseException:
            self._leave()
            raise

    def exit_pass_ctx(self) -> None:
        try:
            if self._frames:
                self.abort()
            self.observer.exit_pass_context()
        finally:
            self._leave()

    def run_before_pass(self, mod: Any, info: Any) -> None:
        name, depth = str(info.name), len(self._frames)
        frame = _Frame(name, depth, None)
        if self._observes(name, depth):
            parent = next((f.event.sequence for f in reversed(self._frames) if f.event is not None), None)
            frame.event = PassEvent(name, self._next_sequence(), depth, parent, self.phase_provider())
            frame.state = self.observer.pass_started(mod, frame.event)
        self._frames.append(frame)

    def run_after_pass(self, mod: Any, info: Any) -> None:
        name = str(info.name)
        expected = self._frames[-1].name if self._frames else None
        if name != expected:
            self.observer.callback_mismatch(name, expected)
            self.abort(RuntimeError(f"after-pass callback of {name!r} while {expected!r} was running"))
            return
        frame = self._frames.pop()
        if frame.event is not None:
            self.observer.pass_finished(mod, frame.event, frame.state)

    def abort(self, error: BaseException | None = None) -> tuple[IncompletePass, ...]:
        """Close every open frame, outermost first (the last one is nearest the failure), telling the observer."""
        open_frames = tuple(IncompletePass(f.name, f.depth, f.event, f.state) for f in self._frames)
        self._frames.clear()
        if open_frames:
            self.observer.passes_incomplete(open_frames, error)
        return open_frames


__all__ = ["CapturePredicate", "IncompletePass", "PassEvent", "PassEventObserver", "SequenceAllocator",
           "StackedPassInstrument", "active_stacked_pass_instruments", "current_pass_phase", "pass_phase"]
