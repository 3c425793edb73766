"""`tilelang.cuda.intrinsics`: the portable swizzle helpers, the same functions as `tilelang.intrinsics`; `macro`
holds upstream's NVIDIA instruction emitters, importable and an error to build."""

from ...intrinsics import get_swizzle_layout, make_mma_swizzle_layout  # noqa: F401

__all__ = ["get_swizzle_layout", "make_mma_swizzle_layout"]
