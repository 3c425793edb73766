"""Upstream TileLang's `tilelang.tools`: `plot_layout` (pictures of layouts and fragments)."""

from .plot_layout import plot_layout

__all__ = ["plot_layout"]
