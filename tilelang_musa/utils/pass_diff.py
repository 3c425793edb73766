"""Upstream's import path for the pass-diff tool: `from tilelang.utils.pass_diff import pass_diff`. It lives beside the
passes (transform/pass_diff.py), where tilelang.compile reaches it too."""

from ..transform.pass_diff import _generate_html, diff_step, pass_diff  # noqa: F401

__all__ = ["pass_diff", "diff_step"]
