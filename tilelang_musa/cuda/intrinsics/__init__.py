"""`tilelang.cuda.intrinsics`: the portable swizzle helpers, the same functions as `tilelang.intrinsics`."""

from ...intrinsics import get_swizzle_layout, make_mma_swizzle_layout  # noqa: F401

__all__ = ["get_swizzle_layout", "make_mma_swizzle_layout"]
