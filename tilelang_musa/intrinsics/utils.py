"""`tilelang.intrinsics.utils` as TileLang releases before 0.1.10 named it (libraries written then, e.g. BitBLAS's
TileLang templates, import their tile helpers from here): the swizzle helpers of `tilelang.intrinsics` and the
matrix-instruction tile size that such code checks its block sizes against, and `index_to_coordinates`."""

from __future__ import annotations

from ..ir.linear_index import index_to_coordinates
from . import get_swizzle_layout, make_mma_swizzle_layout

_EIGHT_BIT = {"int8", "uint8", "float8_e4m3", "float8_e4m3fn", "float8_e5m2"}


def get_mma_micro_size(dtype: str) -> tuple[int, int, int]:
    """(x, y, k) of one warp-level matrix tile: 16 x 16, k 16 for 16-bit inputs and 32 for 8-bit ones. Code built
    on it only sizes its blocks by it; T.gemm picks MUSA's own instruction shapes."""
    return 16, 16, 32 if str(dtype) in _EIGHT_BIT else 16


__all__ = ["get_mma_micro_size", "get_swizzle_layout", "index_to_coordinates", "make_mma_swizzle_layout"]
