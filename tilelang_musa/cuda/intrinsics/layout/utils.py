"""Upstream's module path of the portable swizzle helpers (see the package docstring)."""

from . import get_swizzle_layout, make_mma_swizzle_layout  # noqa: F401

__all__ = ["get_swizzle_layout", "make_mma_swizzle_layout"]
