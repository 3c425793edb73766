"""Compile sessions: the tools that watch one compilation, and the hooks tilelang.compile calls them through.

A `PassInstrumentationTool` gives each PassContext of the compile a fresh PassInstrument
(`create_pass_instrument`), may wrap each pass pipeline (`pipeline_scope`) and the code generation
(`run_codegen`, which must call `next_call()` once), and is told when the compile ends (`finish`, with the error
the compile raised, if any). `compile_pass_instrumentation(name)` opens a session: the tools registered with
`register_pass_instrumentation_tool` (fresh ones from their factories) and those passed in `tools=`. A session
opened inside another one reuses it, so every PassContext of one compile reports to the same tools.

On MUSA, tilelang.compile / tilelang.lower open a session per compile (jit/observers.py): each kernel's lowering
(transform/pipeline.py) runs under `pass_pipeline("musa")` with the session's instruments in its PassContext, and
the MUSA source printer runs through `run_codegen_with_instrumentation("target.build.tilelang_musa", ...)` with the
lowered device IRModule; its result is the printed source (`codegen.MUSASource`), not a built runtime module:
the kernel library is built afterwards by the backend's toolchain. A compile with a session that has tools lowers
even when the kernel cache holds the kernel (the tools get the passes they watch).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from .events import pass_phase

_session: ContextVar["CompilePassInstrumentationSession | None"] = ContextVar("tilelang_musa_compile_session",
                                                                              default=None)
_instrument_context: ContextVar[str | None] = ContextVar("tilelang_musa_instrument_context", default=None)
_factories_lock = threading.RLock()  # held only to register and to snapshot the factories
_factories: dict[str, Callable[[], "PassInstrumentationTool"]] = {}

_Result = TypeVar("_Result")


@dataclass(frozen=True)
class CodegenEvent:
    name: str  # "target.build.tilelang_musa" for the MUSA source printer
    mod: Any  # the lowered device functions (an IRModule)
    target: Any


class PassInstrumentationTool:
    """A tool of a compile session; every hook does nothing by default."""

    pass_instrument_priority = 0  # lower runs first among the session's instruments in a PassContext

    def create_pass_instrument(self) -> object | None:
        return None

    def pipeline_scope(self, base_phase: str) -> AbstractContextManager[None]:
        return nullcontext()

    def run_codegen(self, event: CodegenEvent, next_call: Callable[[], Any]) -> Any:
        return next_call()

    def finish(self, error: BaseException | None) -> None:
        pass


_Tool = TypeVar("_Tool", bound=PassInstrumentationTool)


class CompilePassInstrumentationSession:
    def __init__(self, tools: Sequence[PassInstrumentationTool], *, name: str | None = None) -> None:
        self.name = name
        self.tools = tuple(tools)

    def create_pass_instruments(self, *, context: str | None = None) -> list[object]:
        """One fresh instrument per tool that makes one, by (priority, registration order). `context` describes
        the PassContext; tools read it with `current_pass_instrument_context()` while they create theirs."""
        token = _instrument_context.set(None if context is None else str(context))
        try:
            made = [(tool.pass_instrument_priority, i, tool.create_pass_instrument())
                    for i, tool in enumerate(self.tools)]
        finally:
            _instrument_context.reset(token)
        return [instrument for _, _, instrument in sorted((m for m in made if m[2] is not None),
                                                          key=lambda m: (m[0], m[1]))]

    @contextmanager
    def pipeline_scope(self, base_phase: str) -> Iterator[None]:
        with ExitStack() as scopes:
            for tool in self.tools:
                scopes.enter_context(tool.pipeline_scope(base_phase))
            yield

    def run_codegen(self, event: CodegenEvent, call: Callable[[], _Result]) -> _Result:
        """The first tool registered is the outermost wrapper."""
        def wrap(tool: PassInstrumentationTool, inner: Callable[[], Any]) -> Callable[[], Any]:
            return lambda: tool.run_codegen(event, inner)

        for tool in reversed(self.tools):
            call = wrap(tool, call)
        return call()

    def finish(self, error: BaseException | None) -> None:
        """Every tool's finish, last registered first; a tool's failure is raised only when the compile itself
        succeeded (it must not hide the compile's own error)."""
        first_failure = None
        for tool in reversed(self.tools):
            try:
                tool.finish(error)
            except BaseException as failure:  # noqa: BLE001 - the other tools still finish
                first_failure = first_failure or failure
        if error is None and first_failure is not None:
            raise first_failure

    def find_tool(self, tool_type: type[_Tool]) -> _Tool | None:
        return next((t for t in self.tools if isinstance(t, tool_type)), None)


def register_pass_instrumentation_tool(name: str, factory: Callable[[], PassInstrumentationTool]) -> None:
    """Every compile session opened from now on gets `factory()` (a later registration of `name` replaces it)."""
    with _factories_lock:
        _factories[str(name)] = factory


def unregister_pass_instrumentation_tool(name: str) -> None:
    with _factories_lock:
        _factories.pop(str(name), None)


def current_compile_pass_instrumentation() -> CompilePassInstrumentationSession | None:
    return _session.get()


def session_has_tools() -> bool:
    """Whether a compile opened now has tools: the open session's, or registered ones for a new session."""
    session = _session.get()
    if session is not None:
        return bool(session.tools)
    with _factories_lock:
        return bool(_factories)


def current_pass_instrument_context() -> str | None:
    return _instrument_context.get()


@contextmanager
def compile_pass_instrumentation(name: str | None = None, *, tools: Sequence[PassInstrumentationTool] = (),
                                 include_default_tools: bool = True,
                                 reuse_existing: bool = True) -> Iterator[CompilePassInstrumentationSession]:
    """Open the session of one compilation (see the module's docstring). Inside an open session (and with
    `reuse_existing`) it yields that one, which cannot take other tools then; `reuse_existing=False` opens an
    independent session."""
    outer = _session.get()
    if outer is not None and reuse_existing:
        if tools or not include_default_tools:
            raise ValueError("compile_pass_instrumentation: a session is open already; tools= and "
                             "include_default_tools=False need reuse_existing=False")
        yield outer
        return
    if include_default_tools:
        with _factories_lock:
            factories = list(_factories.values())
        session_tools = [factory() for factory in factories] + list(tools)
    else:
        session_tools = list(tools)
    session = CompilePassInstrumentationSession(session_tools, name=name)
    token = _session.set(session)
    error: BaseException | None = None
    try:
        yield session
    except BaseException as raised:
        error = raised
        raise
    finally:
        try:
            session.finish(error)
        finally:
            _session.reset(token)


def create_pass_instruments(*, context: str | None = None) -> list[object]:
    """The open session's instruments for a new PassContext; [] without a session."""
    session = _session.get()
    return [] if session is None else session.create_pass_instruments(context=context)


@contextmanager
def instrument_current_pass_context() -> Iterator[None]:
    """Add the open session's instruments to the PassContext entered now, for the body (for a caller that entered
    the PassContext before opening the session)."""
    session = _session.get()
    instruments = [] if session is None else session.create_pass_instruments()
    if not instruments:
        yield
        return
    from tvm.ir.transform import PassContext

    context = PassContext.current()
    before = list(context.instruments)
    try:
        context.override_instruments([*before, *instruments])
    except BaseException:
        context.override_instruments(before)  # it exits the old instruments before entering the new ones
        raise
    try:
        yield
    finally:
        context.override_instruments(before)


def run_codegen_with_instrumentation(name: str, mod: Any, target: Any, call: Callable[[], _Result]) -> _Result:
    session = _session.get()
    return call() if session is None else session.run_codegen(CodegenEvent(name, mod, target), call)


@contextmanager
def pass_pipeline(name: str) -> Iterator[None]:
    """The body is the pass pipeline `name`: its events get the phase `pipeline_<name>`, inside every tool's
    pipeline_scope."""
    phase = f"pipeline_{name}"
    session = _session.get()
    with pass_phase(phase):
        if session is None:
            yield
        else:
            with session.pipeline_scope(phase):
                yield


__all__ = ["CodegenEvent", "CompilePassInstrumentationSession", "PassInstrumentationTool",
           "compile_pass_instrumentation", "create_pass_instruments", "current_compile_pass_instrumentation",
           "current_pass_instrument_context", "instrument_current_pass_context", "pass_pipeline",
           "register_pass_instrumentation_tool", "run_codegen_with_instrumentation",
           "unregister_pass_instrumentation_tool"]
