"""Upstream TileLang's `tilelang.tools`: `plot_layout` (pictures of layouts and fragments, shared-memory banks),
`pass_timing` (how long each pass of a compile took), `lower_trace` (the IR pass by pass, then the MUSA source) and
`Analyzer` (a program's FLOPs and global bytes, and their time at the device's peak rates)."""

from . import lower_trace, pass_timing
from .analyzer import AnalysisResult, Analyzer
from .plot_layout import bank_grid, plot_layout

__all__ = ["AnalysisResult", "Analyzer", "bank_grid", "lower_trace", "pass_timing", "plot_layout"]
