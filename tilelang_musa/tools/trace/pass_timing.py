"""Pass timing: how long each lowering pass of a compile took, as upstream's `tilelang.tools.pass_timing`.

    TILELANG_PASS_TIMING=1 python my_kernel.py        # or upstream's TILELANG_PASS_PROFILE=1
    tilelang.compile(f, pass_configs={"tl.pass_profile": True, "tl.pass_profile_threshold_ms": 1.0})

`TileLangPassTimingInstrument.instrument` is a TVM PassInstrument: the pipeline (pipeline.py) runs every pass, ours
(Python functions wrapped as `tl.*` TVM passes) and TVM's (`tirx.*`, `s_tir.*`), under a PassContext holding it, so
each call gets a record with its inclusive time and its self time (less the passes it ran inside it, which appear
nested below it). `stage(name)` times a step that is not a pass the same way: tilelang.compile times the MUSA source
printing (`codegen.MUSASource`) and the build of the kernel library (`build.<toolchain>`). Records accumulate over
the PassContexts of one compile (a program of several T.Kernel scopes is lowered once per kernel), and the compile
prints `report()` to stderr once at its end. A compile observed this way lowers again whatever the cache holds.
This module sits beside the passes, where tilelang.compile reaches it; tools/pass_timing.py is upstream's import path.
"""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import tvm

from ... import env
from ...instrumentation import PassInstrumentationTool, current_pass_instrument_context
from ...ir.options import CompileOptions


@dataclass
class PassTimingRecord:
    """One finished pass (or stage): its inclusive and self wall-clock seconds, nesting depth (0: called by the
    pipeline itself), start order and the kernel it ran on."""

    name: str
    duration_s: float
    depth: int
    self_duration_s: float = 0.0
    sequence: int = 0
    kernel: str = ""


@dataclass
class _Open:
    name: str
    start: float
    depth: int
    sequence: int
    kernel: str
    children_s: float = 0.0


def _kernel_label(mod: Any) -> str:
    """The global symbol of the module's function ("a +1 more" for several), "" when there is none."""
    try:
        names = []
        for gvar, func in mod.functions.items():
            attrs = getattr(func, "attrs", None)
            name = str(attrs["global_symbol"]) if attrs is not None and "global_symbol" in attrs else gvar.name_hint
            if name not in names:
                names.append(str(name))
        return "" if not names else names[0] if len(names) == 1 else f"{names[0]} +{len(names) - 1} more"
    except Exception:  # noqa: BLE001 - a label must never fail a pass
        return ""


@tvm.ir.instrument.pass_instrument
class _Timer:
    """The TVM side: opens a frame before each pass, closes it after. Holds the state, not the wrapper."""

    def __init__(self) -> None:
        self.records: list[PassTimingRecord] = []
        self.stack: list[_Open] = []
        self.sequence = 0
        self.kernel = ""  # the label of the passes that follow, over the module's function name
        self.stages: set[int] = set()  # sequence numbers of the records that are stages, not passes

    def exit_pass_ctx(self) -> None:
        self.stack.clear()  # a pass that raised never reached run_after_pass

    def run_before_pass(self, mod: Any, info: Any) -> None:
        self.open(str(info.name), self.kernel or _kernel_label(mod))

    def run_after_pass(self, mod: Any, info: Any) -> None:
        if self.stack and self.stack[-1].name == str(info.name):
            self.close()

    def open(self, name: str, kernel: str) -> None:
        self.stack.append(_Open(name, time.monotonic(), len(self.stack), self.sequence, kernel))
        self.sequence += 1

    def close(self) -> None:
        frame = self.stack.pop()
        duration = time.monotonic() - frame.start
        self.records.append(PassTimingRecord(frame.name, duration, frame.depth, max(0.0, duration - frame.children_s),
                                             frame.sequence, frame.kernel))
        if self.stack:
            self.stack[-1].children_s += duration


class TileLangPassTimingInstrument:
    """Per-pass timing. Give `.instrument` to a PassContext (tilelang.compile does so while pass timing is on);
    `.records` lists what ran, in start order, `report()` is the table. `threshold_ms` leaves out of the table the
    passes whose inclusive time is below it (0: every pass)."""

    def __init__(self, threshold_ms: float = 0.0) -> None:
        self._timer = _Timer()
        self._threshold_ms = float(threshold_ms)

    @property
    def instrument(self) -> Any:
        """The TVM PassInstrument to put in `PassContext(instruments=[...])`."""
        return self._timer

    @property
    def threshold_ms(self) -> float:
        return self._threshold_ms

    @property
    def kernel(self) -> str:
        """The label of the passes that follow ("": the name of the function they run on). A compile of a program
        with several T.Kernel scopes names each scope while its passes run."""
        return self._timer.kernel

    @kernel.setter
    def kernel(self, label: str) -> None:
        self._timer.kernel = label

    @property
    def records(self) -> list[PassTimingRecord]:
        return sorted(self._timer.records, key=lambda r: r.sequence)

    @property
    def total_duration_s(self) -> float:
        """The time of the top-level records (nested passes are inside their parents' time)."""
        return sum(r.duration_s for r in self._timer.records if r.depth == 0)

    def reset(self) -> None:
        self._timer.records.clear()
        self._timer.stack.clear()
        self._timer.stages.clear()
        self._timer.sequence = 0

    @contextlib.contextmanager
    def stage(self, name: str, kernel: str = "") -> Iterator[None]:
        """Time the body as a record named `name` (a compile stage that is not a TVM pass), nested like a pass.
        A body that raises leaves no record."""
        self._timer.stages.add(self._timer.sequence)
        self._timer.open(name, kernel)
        try:
            yield
        except BaseException:
            self._timer.stack.pop()
            raise
        self._timer.close()

    def report(self, context: str | None = None) -> str:
        """The table: every record (indented by depth) with its inclusive and self time and their share of the
        total, then the slowest ten by inclusive time."""
        title = "TileLang pass timing" + (f": {context}" if context else "")
        if not self._timer.records:
            return f"{title}: no passes ran"
        threshold_s, total = self._threshold_ms / 1000.0, self.total_duration_s
        records = self.records
        shown = [r for r in records if r.duration_s >= threshold_s]
        # The kernel each pass ran on is named where the records cover several (one compile, several T.Kernel scopes).
        several = len({r.kernel for r in records if r.kernel}) > 1
        names = {id(r): "  " * r.depth + (f"{r.name} ({r.kernel})" if several and r.kernel else r.name)
                 for r in records}
        width = max([40] + [len(names[id(r)]) for r in shown])
        rule = "-" * (width + 48)

        def share(seconds: float) -> float:
            return seconds / total * 100 if total > 0 else 0.0

        passes = sum(r.duration_s for r in records if r.depth == 0 and r.sequence not in self._timer.stages)
        lines = ["=" * len(rule), title, "=" * len(rule),
                 f"Total: {total * 1000:.2f} ms in {len(records)} passes and stages; the passes' own: "
                 f"{passes * 1000:.2f} ms" + (f" (shown: inclusive time >= {self._threshold_ms:g} ms)"
                                              if self._threshold_ms > 0 else ""),
                 rule, f"{'#':>3}  {'Pass':<{width}} {'Inclusive':>12} {'Self':>12} {'Incl %':>7} {'Self %':>7}", rule]
        for index, r in enumerate(records, 1):
            if r.duration_s >= threshold_s:
                lines.append(f"{index:>3}  {names[id(r)]:<{width}} {r.duration_s * 1000:>9.2f} ms "
                             f"{r.self_duration_s * 1000:>9.2f} ms {share(r.duration_s):>6.1f}% "
                             f"{share(r.self_duration_s):>6.1f}%")
        lines.append(rule)
        slowest = sorted(shown, key=lambda r: r.duration_s, reverse=True)[:10]
        if slowest:
            lines.append(f"Slowest {len(slowest)} by inclusive time:")
            lines += [f"  {rank:>2}. {names[id(r)].strip():<{width}} {r.duration_s * 1000:>9.2f} ms "
                      f"{share(r.duration_s):>5.1f}%" for rank, r in enumerate(slowest, 1)]
        skipped = len(records) - len(shown)
        if skipped:
            lines.append(f"({skipped} under {self._threshold_ms:g} ms not shown)")
        lines.append("=" * len(rule))
        return "\n".join(lines)

    def print_report(self, context: str | None = None, file: Any = None) -> None:
        print(self.report(context), file=file or sys.stderr, flush=True)


def timing_for_compile(options: CompileOptions | Mapping[Any, Any]) -> TileLangPassTimingInstrument | None:
    """A fresh instrument when the compile asks for pass timing (the pass config TL_PASS_PROFILE, or
    TILELANG_PASS_TIMING / TILELANG_PASS_PROFILE), with its threshold (TL_PASS_PROFILE_THRESHOLD_MS over
    TILELANG_PASS_TIMING_THRESHOLD_MS); None when it does not."""
    options = CompileOptions.of(options)
    if not (options.pass_profile or env.is_pass_profile_enabled()):
        return None
    if options.pass_profile_threshold_ms is not None:
        threshold = env.parse_threshold_ms(options.pass_profile_threshold_ms,
                                           "pass config TL_PASS_PROFILE_THRESHOLD_MS")
    else:
        threshold = env.get_pass_profile_threshold_ms()
    return TileLangPassTimingInstrument(threshold)


def build_pass_instruments(base_instruments: Any, threshold_ms: float | None
                           ) -> tuple[list[Any], TileLangPassTimingInstrument | None]:
    """Upstream 0.1.13's helper: `base_instruments` with a pass-timing instrument first (so that the others'
    after-pass callbacks are not timed), and that timing; no timing when `threshold_ms` is None."""
    instruments = list(base_instruments)
    if threshold_ms is None:
        return instruments, None
    timing = TileLangPassTimingInstrument(threshold_ms)
    return [timing.instrument, *instruments], timing


@contextlib.contextmanager
def report_pass_timing_on_exit(timing: TileLangPassTimingInstrument | None, context: str) -> Iterator[None]:
    """Upstream 0.1.13's helper: print `timing`'s report when the body ends, also when it raised."""
    try:
        yield
    finally:
        if timing is not None:
            timing.print_report(context)


class PassTimingTool(PassInstrumentationTool):
    """Pass timing as a tool of a compile session (tilelang.instrumentation): a fresh TileLangPassTimingInstrument
    for each PassContext the session instruments (tilelang.compile: one per kernel lowered), named by the context
    the session gave it; one report of them all, on stderr, when the session finishes (also when it failed)."""

    pass_instrument_priority = -100  # its clock runs inside the other instruments' callbacks, not around them

    def __init__(self, threshold_ms: float = 0.0) -> None:
        self.threshold_ms = float(threshold_ms)
        self._runs: list[tuple[str | None, TileLangPassTimingInstrument]] = []
        self._finished = False

    def create_pass_instrument(self) -> Any:
        timing = TileLangPassTimingInstrument(self.threshold_ms)
        self._runs.append((current_pass_instrument_context(), timing))
        return timing.instrument

    @property
    def timings(self) -> tuple[TileLangPassTimingInstrument, ...]:
        return tuple(timing for _, timing in self._runs)

    @property
    def contexts(self) -> tuple[str | None, ...]:
        return tuple(context for context, _ in self._runs)

    @property
    def records(self) -> list[PassTimingRecord]:
        return [record for _, timing in self._runs for record in timing.records]

    def report(self) -> str:
        return "\n\n".join(timing.report(context) for context, timing in self._runs)

    def print_report(self, file: Any = None) -> None:
        if self._runs:
            print(self.report(), file=file or sys.stderr, flush=True)

    def finish(self, error: BaseException | None) -> None:
        if not self._finished:
            self._finished = True
            self.print_report()


def create_pass_timing_tool(pass_configs: CompileOptions | Mapping[Any, Any] | None) -> PassTimingTool | None:
    """A PassTimingTool when the pass configs or the environment ask for pass timing (as `timing_for_compile`)."""
    timing = timing_for_compile(pass_configs or {})
    return None if timing is None else PassTimingTool(timing.threshold_ms)


__all__ = ["PassTimingRecord", "PassTimingTool", "TileLangPassTimingInstrument", "build_pass_instruments",
           "create_pass_timing_tool", "report_pass_timing_on_exit", "timing_for_compile"]
