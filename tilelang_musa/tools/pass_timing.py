"""Upstream's import path for pass timing: `from tilelang.tools.pass_timing import TileLangPassTimingInstrument`.

    TILELANG_PASS_TIMING=1 python my_kernel.py     # (or TILELANG_PASS_PROFILE=1) a table per compile, on stderr

It lives in tools/trace/pass_timing.py, below jit, where tilelang.compile reaches it; see there. Upstream's
`PassTimingTool` / `create_pass_timing_tool` belong to its compile-instrumentation sessions, which this build does not
have: tilelang.compile owns one instrument per compile instead (`timing_for_compile`)."""

from .trace.pass_timing import PassTimingRecord, TileLangPassTimingInstrument, timing_for_compile

__all__ = ["PassTimingRecord", "TileLangPassTimingInstrument", "timing_for_compile"]
