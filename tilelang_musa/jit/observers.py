"""The debugging tools that watch one compile: pass timing (TILELANG_PASS_TIMING, tl.pass_profile) and the lower
trace (TL_LOWER_TRACE, tilelang.tools.lower_trace.enable()). Both are PassInstruments of the pipeline's PassContext;
the compile also times its codegen and build stages and hands the trace the generated source. The compile also
runs in a tilelang.instrumentation session (`compiling()`): the pipeline gives its tools their instruments, the
source printer runs through their codegen hooks."""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Iterator

from ..instrumentation import compile_pass_instrumentation, run_codegen_with_instrumentation
from ..instrumentation.session import session_has_tools
from ..ir.options import CompileOptions
from ..tools.trace.lower_trace import LowerTraceSession, session_for_compile
from ..tools.trace.pass_timing import TileLangPassTimingInstrument, timing_for_compile


class CompileObservers:
    def __init__(self, name: str, target: Any, options: CompileOptions) -> None:
        self.name, self.target = name, target
        self.timing: TileLangPassTimingInstrument | None = timing_for_compile(options)
        self.trace: LowerTraceSession | None = session_for_compile(name)

    @property
    def active(self) -> bool:
        """Something watches: the compile must lower, whatever the cache holds."""
        return self.timing is not None or self.trace is not None or session_has_tools()

    @contextlib.contextmanager
    def compiling(self) -> Iterator[None]:
        """The compile's lowering, printing and build: inside its instrumentation session (the one open already,
        or a new one with the registered tools), then `finish()`, whether it succeeded or not."""
        try:
            with compile_pass_instrumentation(name=self.name):
                yield
        finally:
            self.finish()

    def print_source(self, device_mod: Any, call: Any) -> Any:
        """The source printer `call()`, through the instrumentation tools' codegen hooks."""
        return run_codegen_with_instrumentation("target.build.tilelang_musa", device_mod, self.target, call)

    def instruments(self) -> list[Any]:
        # The trace's snapshots first, timing last: its clock starts after the trace's before-snapshot.
        return [t.instrument for t in (self.trace, self.timing) if t is not None]

    def lowering_kernel(self, label: str) -> None:
        """The passes that follow lower the T.Kernel scope `label` ("" where the program has one)."""
        for tool in (self.trace, self.timing):
            if tool is not None:
                tool.kernel = label

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a compile stage that is not a pass (a row of the timing table)."""
        if self.timing is None:
            yield
            return
        with self.timing.stage(name):
            yield

    def codegen(self, lowered: str, source: str) -> None:
        if self.trace is not None:
            self.trace.record_codegen(lowered, source)

    def finish(self) -> None:
        """Once per compile, whether it succeeded or not: the timing table on stderr, the trace's report named."""
        if self.timing is not None:
            arch = self.target.attrs["arch"] if "arch" in self.target.attrs else self.target.kind.name
            self.timing.print_report(f"kernel `{self.name}` ({arch})", file=sys.stderr)
        if self.trace is not None:
            self.trace.finish()
