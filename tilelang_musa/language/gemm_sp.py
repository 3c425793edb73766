"""`T.gemm_sp`: C (+)= decompress(A_sparse, E) @ op(B) for a 2:4 structured-sparse A (upstream's sparse GEMM).

MUSA has no sparse matrix instruction this compiler models, so the block decompresses its A tile into a dense
shared tile and runs `T.gemm` on it (SQMMA / WMMA / MMA / FMA, as for any GEMM): the result is exact, the sparsity
saves no matrix work. E is the metadata `tilelang.utils.sparse.compress` writes (sparse_format.py describes it).
"""

from __future__ import annotations

from typing import Any

from tvm import tirx

from ..errors import UnsupportedError
from ..layout import GemmWarpPolicy
from ..tileop.region import Region, to_region
from .builder import kernel_trace
from .sparse_format import META_DTYPES, SPARSE_DTYPES, get_e_factor, sparse_group

STAGED_SCOPES = ("shared", "shared.dyn", "local.fragment")  # where A_sparse and E may be; a fragment is staged


def gemm_sp(A_sparse: Any, E: Any, B: Any, C: Any, transpose_A: bool = False, transpose_E: bool = False,  # noqa: N803
            transpose_B: bool = False, policy: GemmWarpPolicy = GemmWarpPolicy.Square, clear_accum: bool = False,
            k_pack: int = 1, wg_wait: int = 0) -> None:
    """C (+)= A @ op(B) where A (M, K) is 2:4 sparse along K (1:2 for float32) and given as its kept elements
    A_sparse (M, K/2) and metadata E (M, K/e_factor), both whole tiles in shared memory or fragments, as
    `tilelang.utils.sparse.compress` lays them out; `transpose_A` takes A_sparse as (K/2, M) (A given K-major),
    `transpose_E` takes E as (K/e_factor, M) (the transposes of compress's output); B and C as for T.gemm.
    Decompresses A into a dense shared tile (M x K elements more shared memory; a fragment operand is first
    copied to shared), then T.gemm. Example: T.gemm_sp(A_shared, E_shared, B_shared, C_local)"""
    trace = kernel_trace("T.gemm_sp")
    a_region = to_region(A_sparse, "T.gemm_sp", "A_sparse")[0]
    e_region = to_region(E, "T.gemm_sp", "E")[0]
    a_shape = _whole_tile_shape(trace, "A_sparse", a_region)
    e_shape = _whole_tile_shape(trace, "E", e_region)
    a_dtype, meta_dtype = a_region.dtype, e_region.dtype
    if a_dtype not in SPARSE_DTYPES:
        raise UnsupportedError(f"T.gemm_sp: A of dtype {a_dtype} is not supported (2:4 sparsity takes one of "
                               f"{', '.join(SPARSE_DTYPES)})", trace.loc)
    if meta_dtype not in META_DTYPES:
        raise trace.error(f"T.gemm_sp: E must be an integer tile ({', '.join(META_DTYPES)}); got {meta_dtype}")
    kept, group = sparse_group(a_dtype)
    m, stored = (a_shape[1], a_shape[0]) if transpose_A else a_shape
    k = stored * group // kept
    factor = get_e_factor(a_dtype, meta_dtype)
    want_e = [k // factor, m] if transpose_E else [m, k // factor]
    if k % factor or e_shape != want_e:
        a_as = f"({stored}, {m})" if transpose_A else f"({m}, {stored})"
        e_as = f"({k} // {factor}, {m})" if transpose_E else f"({m}, {k} // {factor})"
        raise trace.error(f"T.gemm_sp: A_sparse {a_region.name} is {a_as}, so A is ({m}, {k}) and E must be {e_as} of "
                          f"{meta_dtype} (get_e_factor; transpose_E={bool(transpose_E)}); got E {e_region.name} "
                          f"{e_shape}")

    from . import gemm_sp_decompress  # parses its macro at import: only programs that use T.gemm_sp pay for it
    from .allocate import alloc_shared
    from .gemm import gemm

    a_tile = _in_shared(trace, a_region, a_shape)
    e_tile = _in_shared(trace, e_region, e_shape)
    trace.naming_hint = f"{a_region.name}_dense"  # the dense tile's name in the MUSA C
    A_dense = alloc_shared((k, m) if transpose_A else (m, k), a_dtype)  # noqa: N806 - A's orientation, for T.gemm
    gemm_sp_decompress.decompress(a_tile, e_tile, A_dense, m, k, factor, kept, group, bool(transpose_A),
                                  bool(transpose_E), a_dtype)
    gemm(A_dense, B, C, bool(transpose_A), transpose_B, policy, clear_accum, k_pack, wg_wait)


def _whole_tile_shape(trace: Any, what: str, region: Region) -> list[int]:
    shape = [int(s) if isinstance(s, tirx.IntImm) else None for s in region.buffer.ty.shape]
    if region.scope not in STAGED_SCOPES or len(shape) != 2 or None in shape \
            or [e if isinstance(e, int) else getattr(e, "value", None) for e in region.extents] != shape:
        raise trace.error(f"T.gemm_sp: {what} must be a whole 2-D tile of constant shape in shared memory or a "
                          f"fragment; got {region.name} ({region.scope}, shape {list(region.buffer.ty.shape)}, "
                          f"extents {list(region.extents)})")
    return shape


def _in_shared(trace: Any, region: Region, shape: list[int]) -> Any:
    """The operand's buffer if it is in shared memory, else (a fragment) a shared copy of it: the decompression
    reads each element from whichever thread needs it."""
    if region.scope != "local.fragment":
        return region.buffer
    from .allocate import alloc_shared
    from .copy import copy

    trace.naming_hint = f"{region.name}_staged"
    staged = alloc_shared(shape, region.dtype)
    copy(region.buffer, staged)
    return staged
