"""Upstream's IR lower trace (`tilelang.tools.lower_trace`): how the IR changes pass by pass.

    TL_LOWER_TRACE=1 python my_kernel.py          # an HTML report per compile (1/on/true/yes/html)
    TL_LOWER_TRACE=terminal python my_kernel.py   # the diffs printed as the passes run (both: the two)
    TL_LOWER_TRACE_DIR=reports ...                # where the reports go (default ./tmp/lower_trace_dir)

    from tilelang.tools import lower_trace as lt
    lt.enable(mode="both")                         # the same for the compiles that follow; lt.disable() stops it
    steps = lt.lower_trace(func, [("Simplify", tvm.tirx.transform.StmtSimplify()), pass_b], mode="html",
                           html_path="diff.html")  # a chain of passes of your own, no compile

A traced compile (tilelang.compile, tilelang.lower) records each pass of the lowering pipeline, ours and TVM's, with
the TVMScript before and after it, the unified diff and its line counts, and as its last step `codegen`: the lowered
device functions before, the generated MUSA source (device kernels and host wrapper, as built) after. It lowers
again whatever the kernel cache holds. `get_last_session().steps` are the last traced compile's steps. The terminal
output and the report are TILELANG_PASS_DIFF's (tools/trace/pass_diff.py), which this builds on.

Not supported here, unlike upstream: the edit-and-recompile workflow (edit `codegen.cpp` and rerun; use
TILELANG_REPLACE_MUSAC or TILELANG_REPLACE_STAGES instead), the raw per-pass `.tir` files and `report.html` link in a
per-script directory (TILELANG_DUMP_IR writes the IR after every pass), pipeline phase tags, and the report's sidebar
and keyboard navigation. A pass that raises leaves the steps before it in the report, not a failed step.
"""

from __future__ import annotations

from typing import Any

from .trace.lower_trace import (
    CODEGEN_STEP, LowerTraceSession, create_pass_instrument, current_mode, disable, enable, get_last_session, reset,
)
from .trace.pass_diff import pass_diff


def lower_trace(func_or_mod: Any, passes: Any, *, mode: str = "terminal", context: int = 3,
                html_path: str = "lower_trace_report.html") -> list[dict]:
    """Run `passes` (a Pass, a list of passes, or of (name, pass) pairs) in order on `func_or_mod` (a PrimFunc or
    an IRModule) and return one step per pass: {name, before_script, after_script, diff_lines, insertions,
    deletions, changed}. `mode`: "terminal" prints the diffs, "html" writes the report to `html_path`, "both"."""
    mode = str(mode).strip().lower()
    if isinstance(passes, tuple) and len(passes) == 2 and isinstance(passes[0], str):
        passes = [passes]  # one (name, pass) pair
    return pass_diff(func_or_mod, passes, mode=mode, html_path=html_path, context=context)


__all__ = ["CODEGEN_STEP", "LowerTraceSession", "create_pass_instrument", "current_mode", "disable", "enable",
           "get_last_session", "lower_trace", "reset"]
