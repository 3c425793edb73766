"""Upstream 0.1.13's import path for pass timing (`from tilelang.utils.pass_timing import ...`); later upstream
moved it to `tilelang.tools.pass_timing`. Both name tools/trace/pass_timing.py's objects."""

import time  # noqa: F401 - upstream's tests patch `tilelang.utils.pass_timing.time.monotonic`

from ..tools.trace.pass_timing import (PassTimingRecord, TileLangPassTimingInstrument, build_pass_instruments,
                                       report_pass_timing_on_exit)

__all__ = ["PassTimingRecord", "TileLangPassTimingInstrument", "build_pass_instruments", "report_pass_timing_on_exit"]
