"""Upstream TileLang's `tilelang.tools`: `plot_layout` (pictures of layouts and fragments, shared-memory banks),
`pass_timing` (how long each pass of a compile took) and `lower_trace` (the IR pass by pass, then the MUSA source)."""

from . import lower_trace, pass_timing
from .plot_layout import bank_grid, plot_layout

__all__ = ["bank_grid", "lower_trace", "pass_timing", "plot_layout"]
