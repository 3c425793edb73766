"""The 2:4 structured-sparse format `T.gemm_sp` reads and `tilelang.utils.sparse.compress` writes (upstream's
"ordered" metadata, as its `sparse_layout` module defines it).

A is sparse along K in groups: of every `group` consecutive elements of a row, `kept` are stored (A_sparse holds
K * kept / group elements a row, in order). Each group has a 4-bit chunk of metadata, packed little-endian into
E's integers (chunk c of an element in bits 4c..4c+3), so one element of E describes `get_e_factor` elements of A.
A chunk is two 2-bit positions (bits 1:0, bits 3:2) in units of 16 bits, NVIDIA's definition:
- 8- and 16-bit A: groups of 4, 2 kept; the positions are those of the kept elements (0..3).
- 32-bit A (float32, which tensor cores read as tf32): groups of 2, 1 kept; the kept element covers two 16-bit
  positions, so its chunk is 0b0100 (element 0 kept) or 0b1110 (element 1 kept).
"""

from __future__ import annotations

from typing import Any

from .dtypes import DType, canonical_dtype

# (kept, group) per dtype of A: upstream's GROUP_CONFIG.
GROUP_CONFIG: dict[DType, tuple[int, int]] = {
    DType("float32"): (1, 2),
    DType("float16"): (2, 4),
    DType("bfloat16"): (2, 4),
    DType("int8"): (2, 4),
    DType("uint8"): (2, 4),
    DType("float8_e4m3fn"): (2, 4),
    DType("float8_e5m2"): (2, 4),
}
SPARSE_DTYPES = tuple(str(d) for d in GROUP_CONFIG)
META_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32")
BITS_PER_GROUP = 4  # two 2-bit positions


def sparse_group(a_dtype: Any) -> tuple[int, int]:
    """(kept, group) of A's dtype; a ValueError names the dtypes 2:4 sparsity takes."""
    name = canonical_dtype(a_dtype)
    if name not in SPARSE_DTYPES:
        raise ValueError(f"2:4 sparsity: A of dtype {name} is not supported (one of {', '.join(SPARSE_DTYPES)})")
    return GROUP_CONFIG[DType(name)]


def meta_bits(meta_dtype: Any) -> int:
    name = canonical_dtype(meta_dtype)
    if name not in META_DTYPES:
        raise ValueError(f"2:4 sparsity: the metadata dtype must be one of {', '.join(META_DTYPES)}; got {name}")
    return DType(name).bits


def get_e_factor(a_dtype: Any, meta_dtype: Any) -> int:
    """How many elements of A (along K) one element of the metadata E describes."""
    return meta_bits(meta_dtype) // BITS_PER_GROUP * sparse_group(a_dtype)[1]


def get_e_replicate_factor(a_dtype: Any) -> int:
    """Upstream's: how many consecutive threads of an NVIDIA sparse MMA share one metadata value (1 for 8-bit A,
    else 2). Nothing here depends on it (T.gemm_sp decompresses A); kept for scripts that import it."""
    return 1 if DType(canonical_dtype(a_dtype)).bits <= 8 else 2


def default_meta_dtype(a_dtype: Any) -> str:
    """int32 for int8 A (CUTLASS's convention), int16 otherwise: upstream's compress default."""
    return "int32" if canonical_dtype(a_dtype) == "int8" else "int16"
