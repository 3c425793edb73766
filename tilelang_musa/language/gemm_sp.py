"""`T.gemm_sp`: C (+)= decompress(A_sparse, E) @ op(B) for a 2:4 structured-sparse A (upstream's sparse GEMM).

MUSA has no sparse matrix instruction this compiler models, so the block decompresses its A tile into a dense
shared tile and runs `T.gemm` on it (SQMMA / WMMA / MMA / FMA, as for any GEMM): the result is exact, the sparsity
saves no matrix work. E is the metadata `tilelang.utils.sparse.compress` writes: for each group of 4 elements
along K, a 4-bit chunk holding the positions of its two kept elements (bits 1:0 the first, 3:2 the second),
packed little-endian into E's integers (`get_e_factor` elements of A per element of E).
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from ..errors import UnsupportedError
from ..layout import GemmWarpPolicy
from ..tileop.region import to_region
from .builder import kernel_trace

# A's dtypes with 2:4 sparsity (2 kept of each 4 along K), and E's integer dtypes: upstream's set for 16- and 8-bit A.
SPARSE_DTYPES = ("float16", "bfloat16", "int8", "uint8", "float8_e4m3", "float8_e4m3fn", "float8_e5m2")
META_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32")
GROUP = 4  # elements of a group along K; 2 of them are kept
BITS_PER_GROUP = 4  # two 2-bit positions


def e_factor(meta_dtype: str) -> int:
    """Elements of A (along K) one element of E describes."""
    return tvm.DataType(meta_dtype).bits // BITS_PER_GROUP * GROUP


def gemm_sp(A_sparse: Any, E: Any, B: Any, C: Any, transpose_A: bool = False, transpose_E: bool = False,  # noqa: N803
            transpose_B: bool = False, policy: GemmWarpPolicy = GemmWarpPolicy.Square, clear_accum: bool = False,
            k_pack: int = 1, wg_wait: int = 0) -> None:
    """C (+)= A @ op(B) where A (M, K) is 2:4 sparse along K and given as its kept elements A_sparse (M, K/2)
    and metadata E (M, K/e_factor), both whole shared tiles as `tilelang.utils.sparse.compress` lays them out;
    B and C as for T.gemm. Decompresses A into a dense shared tile (M x K elements more shared memory), then
    T.gemm. Example: T.gemm_sp(A_shared, E_shared, B_shared, C_local)"""
    trace = kernel_trace("T.gemm_sp")
    if transpose_A or transpose_E:
        raise UnsupportedError("T.gemm_sp: transpose_A / transpose_E (a K-major sparse A) are not supported on MUSA; "
                               "compress A as (M, K) rows and pass transpose_A=False, transpose_E=False", trace.loc)
    a_region = to_region(A_sparse, "T.gemm_sp", "A_sparse")[0]
    e_region = to_region(E, "T.gemm_sp", "E")[0]
    for what, region in (("A_sparse", a_region), ("E", e_region)):
        shape = [int(s) if isinstance(s, tirx.IntImm) else None for s in region.buffer.ty.shape]
        if region.scope not in ("shared", "shared.dyn") or len(shape) != 2 or None in shape \
                or [e if isinstance(e, int) else getattr(e, "value", None) for e in region.extents] != shape:
            raise trace.error(f"T.gemm_sp: {what} must be a whole 2-D shared tile of constant shape; got "
                              f"{region.name} ({region.scope}, shape {list(region.buffer.ty.shape)}, extents "
                              f"{list(region.extents)})")
    a_dtype, meta_dtype = a_region.dtype, e_region.dtype
    if a_dtype not in SPARSE_DTYPES:
        raise UnsupportedError(f"T.gemm_sp: A of dtype {a_dtype} is not supported (2:4 sparsity takes one of "
                               f"{', '.join(SPARSE_DTYPES)})", trace.loc)
    if meta_dtype not in META_DTYPES:
        raise trace.error(f"T.gemm_sp: E must be an integer tile ({', '.join(META_DTYPES)}); got {meta_dtype}")
    m, half_k = (int(s) for s in a_region.buffer.ty.shape)
    k = 2 * half_k
    factor = e_factor(meta_dtype)
    e_shape = [int(s) for s in e_region.buffer.ty.shape]
    if k % factor or e_shape != [m, k // factor]:
        raise trace.error(f"T.gemm_sp: A_sparse {a_region.name} is ({m}, {half_k}), so A is ({m}, {k}) and E must be "
                          f"({m}, {k} // {factor}) of {meta_dtype} (get_e_factor); got E {e_region.name} {e_shape}")

    from . import gemm_sp_decompress  # parses its macro at import: only programs that use T.gemm_sp pay for it
    from .allocate import alloc_shared
    from .gemm import gemm

    trace.naming_hint = f"{a_region.name}_dense"  # the dense tile's name in the MUSA C
    A_dense = alloc_shared((m, k), a_dtype)  # noqa: N806
    gemm_sp_decompress.decompress(a_region.buffer, e_region.buffer, A_dense, m, k, factor, a_dtype)
    gemm(A_dense, B, C, False, transpose_B, policy, clear_accum, k_pack, wg_wait)
