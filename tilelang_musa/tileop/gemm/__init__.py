"""`T.gemm`: the op (base.py) and its per-arch implementations, chosen from a registry (registry.py).

Implementations are registered here, in priority order (matrix-instruction paths come before FMA)."""

from .base import Gemm
from .fma import FMA
from .mma import MMA, SQMMA, SQMMA_SWIZZLED, WMMA
from .registry import GEMM_IMPLEMENTATIONS, GemmImpl, register_gemm_impl, select_implementation

for _impl in (SQMMA_SWIZZLED, SQMMA, WMMA, MMA, FMA):
    if _impl not in GEMM_IMPLEMENTATIONS:
        register_gemm_impl(_impl)

__all__ = ["GEMM_IMPLEMENTATIONS", "Gemm", "GemmImpl", "select_implementation"]
