"""Watching the lowering, not part of it: the IR diff of each pass (pass_diff.py, TILELANG_PASS_DIFF through
pass_diff_hook.py), the lower trace of a compile (lower_trace.py, TL_LOWER_TRACE) and the time each pass takes
(pass_timing.py, TILELANG_PASS_TIMING). tilelang.compile reaches them (jit/observers.py), so they sit below jit in
the layering; `tilelang.tools.lower_trace` / `tilelang.tools.pass_timing` are their upstream import paths."""
