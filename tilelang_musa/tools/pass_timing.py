"""Upstream's import path for pass timing: `from tilelang.tools.pass_timing import TileLangPassTimingInstrument`.

    TILELANG_PASS_TIMING=1 python my_kernel.py     # (or TILELANG_PASS_PROFILE=1) a table per compile, on stderr

It lives in tools/trace/pass_timing.py, below jit, where tilelang.compile reaches it; see there. `PassTimingTool` /
`create_pass_timing_tool` are its form as a tool of a tilelang.instrumentation compile session."""

from .trace.pass_timing import (PassTimingRecord, PassTimingTool, TileLangPassTimingInstrument,
                                create_pass_timing_tool, timing_for_compile)

__all__ = ["PassTimingRecord", "PassTimingTool", "TileLangPassTimingInstrument", "create_pass_timing_tool",
           "timing_for_compile"]
