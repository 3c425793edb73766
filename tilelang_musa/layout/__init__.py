"""Layouts: where a buffer's elements live.

- `Layout` (layout.py): logical coordinates -> physical coordinates (shared-memory layouts, index maps).
- `Fragment` (fragment.py): logical element -> (thread, local slot), with replication; its reduction
  (fragment_reduce.py).
- 2:4 metadata as NVIDIA's CUTLASS compressors order it (sparse_metadata.py), for T.gemm_sp.
- Shared-memory swizzles (swizzle.py): the MUSA SQMMA/TME xor swizzles, `make_sqmma_swizzled_layout`.
- CuTe's layout algebra (cute.py, upstream's `tilelang.layout.cute`), with `to_tilelang` / `from_tilelang`.
- MMA layouts (mma_layouts.py): the register fragments of every MUSA matrix instruction and their block-level
  composition for `T.gemm`; the group partition policy (gemm_partition.py).
"""

from . import cute  # upstream's tilelang.layout.cute: CuTe's layout algebra
from .fragment import (Fragment, make_fully_replicated_fragment, make_fully_replicated_layout_fragment,
                       make_one_per_thread_fragment)
from .fragment_reduce import ReduceThreads, ThreadSplit, reduce_fragment, reduce_threads
from .gemm_partition import GemmWarpPolicy, sqmma_warp_grid
from .layout import Layout, LayoutError
from .sparse_metadata import make_cutlass_metadata_layout
from .mma_layouts import (MMA_INSTRUCTIONS, SQMMA_SHAPES, MmaInstruction, get_mma_instruction, list_mma_instructions,
                          make_gemm_a_fragment, make_gemm_accumulator_fragment, make_gemm_b_fragment)
from .swizzle import (SWIZZLE_LINE, canonical_sqmma_granularity, make_full_bank_swizzled_layout,
                      make_half_bank_swizzled_layout, make_linear_layout, make_padded_layout,
                      make_quarter_bank_swizzled_layout,
                      make_sqmma_swizzled_layout, make_swizzled_layout, make_wgmma_swizzled_layout,
                      make_xor_swizzle_layout, sqmma_descriptor_swizzle_code, swizzle_alignment, swizzle_bytes)

__all__ = [
    "Fragment", "GemmWarpPolicy", "Layout", "LayoutError", "MMA_INSTRUCTIONS", "MmaInstruction", "ReduceThreads",
    "SQMMA_SHAPES", "SWIZZLE_LINE", "ThreadSplit", "canonical_sqmma_granularity", "get_mma_instruction",
    "list_mma_instructions", "make_cutlass_metadata_layout", "make_fully_replicated_fragment", "make_fully_replicated_layout_fragment",
    "make_full_bank_swizzled_layout", "make_gemm_a_fragment", "make_gemm_accumulator_fragment",
    "make_gemm_b_fragment", "make_half_bank_swizzled_layout", "make_linear_layout", "make_quarter_bank_swizzled_layout",
    "make_one_per_thread_fragment", "make_padded_layout", "make_sqmma_swizzled_layout", "make_swizzled_layout",
    "make_wgmma_swizzled_layout", "make_xor_swizzle_layout", "reduce_fragment", "reduce_threads",
    "sqmma_descriptor_swizzle_code", "sqmma_warp_grid", "swizzle_alignment", "swizzle_bytes",
]
