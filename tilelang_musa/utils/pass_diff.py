"""Upstream's import path for the pass-diff tool: `from tilelang.utils.pass_diff import pass_diff`. It lives in
tools/trace/pass_diff.py, where tilelang.compile reaches it too."""

from ..tools.trace.pass_diff import _generate_html, diff_step, pass_diff  # noqa: F401

__all__ = ["pass_diff", "diff_step"]
