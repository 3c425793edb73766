"""Lower trace over a whole compile: the IR before and after each lowering pass, then the MUSA source.

A `LowerTraceSession` belongs to one compile (tilelang.compile or tilelang.lower). Its `instrument`, a TVM
PassInstrument in the PassContext the pipeline runs under, records a step for every pass the pipeline calls (a pass
that runs other passes inside it is one step, as with TILELANG_PASS_DIFF), with pass_diff.py's `diff_step`; the
compile then adds the last step, `codegen`, from the lowered device functions to the generated MUSA source.
The steps go through pass_diff.py's `DiffReport`: printed as they come (terminal), and/or one self-contained HTML
report per compile, `<TL_LOWER_TRACE_DIR>/<kernel>_<time>_<pid>_<n>.html`, rewritten after every step.

Whether a compile is traced: `enable()` / `disable()` when called, else TL_LOWER_TRACE. This module sits beside the
passes, where tilelang.compile reaches it; tools/lower_trace.py is upstream's import path.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from typing import Any

import tvm

from ... import env
from .pass_diff import DiffReport, _script, diff_step

CODEGEN_STEP = "codegen"  # the name of the last step: lowered TIR -> MUSA source

_UNSET: Any = object()
_mode_override: Any = _UNSET  # enable()/disable(): a mode or None (off), over TL_LOWER_TRACE
_dir_override: Any = _UNSET
_last_session: LowerTraceSession | None = None
_numbers = itertools.count()


def current_mode() -> str | None:
    """The mode the next compile is traced in: None (off), "terminal", "html" or "both"."""
    return env.get_lower_trace_mode() if _mode_override is _UNSET else _mode_override


def current_dir() -> str:
    return env.get_lower_trace_dir() if _dir_override is _UNSET else _dir_override


def enable(mode: Any = _UNSET, trace_dir: Any = _UNSET) -> None:
    """Trace the compiles that follow, over TL_LOWER_TRACE: `mode` "terminal", "html" or "both" (1/on/true mean
    "html"; omitted: TL_LOWER_TRACE's mode, else "html"; None/0/off: as `disable()`), the HTML reports in
    `trace_dir` (omitted: TL_LOWER_TRACE_DIR)."""
    global _mode_override, _dir_override
    if mode is _UNSET:
        _mode_override = env.get_lower_trace_mode() or "html"
    else:
        _mode_override = None if mode is None else env.parse_lower_trace_mode(str(mode))
    if trace_dir is not _UNSET:
        _dir_override = env.get_lower_trace_dir() if trace_dir is None else os.fspath(trace_dir)


def disable() -> None:
    """Trace no compile that follows, whatever TL_LOWER_TRACE says (until `enable()`). A compile already under way
    keeps its session."""
    global _mode_override, _dir_override
    _mode_override, _dir_override = None, _UNSET


def reset() -> None:
    """Back to TL_LOWER_TRACE / TL_LOWER_TRACE_DIR deciding, and no last session."""
    global _mode_override, _dir_override, _last_session
    _mode_override, _dir_override, _last_session = _UNSET, _UNSET, None


def get_last_session() -> LowerTraceSession | None:
    """The session of the last traced compile that finished (its `steps`, its `html_path`)."""
    return _last_session


@tvm.ir.instrument.pass_instrument
class _StepRecorder:
    """Records the outermost pass calls of a PassContext into a session."""

    def __init__(self, session: LowerTraceSession) -> None:
        self.session = session
        self.depth = 0
        self.before = ""

    def exit_pass_ctx(self) -> None:
        self.depth = 0  # a pass that raised never reached run_after_pass

    def run_before_pass(self, mod: Any, info: Any) -> None:
        if self.depth == 0:
            self.before = _script(mod)
        self.depth += 1

    def run_after_pass(self, mod: Any, info: Any) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.session.add(str(info.name), self.before, _script(mod))


class LowerTraceSession:
    """The trace of one compile of `name`: `steps` (dicts as pass_diff returns them; the codegen step also has
    `"codegen": True`), `html_path` (None in terminal mode). Set `kernel` to name the T.Kernel scope the following
    passes lower, where a program has several."""

    def __init__(self, name: str, mode: str, trace_dir: str | None = None, context: int = 3) -> None:
        html_path = None
        if mode in ("html", "both"):
            directory = trace_dir or current_dir()
            os.makedirs(directory, exist_ok=True)
            stamp = time.strftime("%Y%m%d_%H%M%S")
            html_path = os.path.join(directory, f"{name}_{stamp}_{os.getpid()}_{next(_numbers)}.html")
        self.name, self.mode, self.context, self.kernel = name, mode, context, ""
        self._report = DiffReport(mode, html_path)
        self._instrument = _StepRecorder(self)

    @property
    def instrument(self) -> Any:
        return self._instrument

    @property
    def steps(self) -> list[dict]:
        return self._report.steps

    @property
    def html_path(self) -> str | None:
        return self._report.html_path

    def add(self, name: str, before: str, after: str, **extra: Any) -> None:
        step = diff_step(f"{name} ({self.kernel})" if self.kernel else name, before, after, self.context)
        self._report.add({**step, **extra})

    def record_codegen(self, lowered: str, source: str) -> None:
        """The last step: the lowered device functions' TVMScript before, the generated MUSA source after."""
        self.kernel = ""
        self.add(CODEGEN_STEP, lowered, source, codegen=True)

    def finish(self) -> None:
        global _last_session
        _last_session = self
        if self.html_path is not None:
            print(f"[lower_trace] {self.name}: {len(self.steps)} steps, report in {self.html_path}", file=sys.stderr)


def session_for_compile(name: str) -> LowerTraceSession | None:
    """A session for a compile of `name` when tracing is on (enable(), else TL_LOWER_TRACE); None when it is off."""
    mode = current_mode()
    return None if mode is None else LowerTraceSession(name, mode)


def create_pass_instrument(name: str = "trace") -> Any:
    """A PassInstrument tracing the passes of a PassContext of your own, in the current mode ("terminal" when
    tracing is off); its session is `instrument.session`."""
    return LowerTraceSession(name, current_mode() or "terminal").instrument
