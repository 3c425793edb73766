"""2:4 structured sparsity for `T.gemm_sp`, under upstream's import path `tilelang.utils.sparse`.

`compress(A)` splits a dense (M, K) tensor with at most 2 nonzeros in each group of 4 consecutive elements of a row
into its kept elements (M, K/2) and their metadata E (M, K/get_e_factor): per group a 4-bit chunk, bits 1:0 the
position of the first kept element and 3:2 of the second, packed little-endian into E's integers (the layout
T.gemm_sp decodes; gemm_sp.py). `randn_semi_sparse` & co. make test inputs with that sparsity.
"""

from __future__ import annotations

import torch

from ..errors import UnsupportedError
from ..language.dtypes import canonical_dtype
from ..language.gemm_sp import BITS_PER_GROUP, GROUP, META_DTYPES, SPARSE_DTYPES, e_factor

KEPT = 2  # elements kept in each group of GROUP


def _sparse_dtype(a_dtype) -> str:
    name = canonical_dtype(a_dtype)
    if name not in SPARSE_DTYPES:
        raise UnsupportedError(f"2:4 sparsity: A of dtype {name} is not supported (one of {', '.join(SPARSE_DTYPES)})")
    return name


def get_e_factor(a_dtype, meta_dtype) -> int:
    """How many elements of A (along K) one element of the metadata E describes."""
    _sparse_dtype(a_dtype)
    meta = canonical_dtype(meta_dtype)
    if meta not in META_DTYPES:
        raise ValueError(f"2:4 sparsity: the metadata dtype must be one of {', '.join(META_DTYPES)}; got {meta}")
    return e_factor(meta)


def compress(A: torch.Tensor, meta_dtype: torch.dtype | None = None, block_m: int | None = None,  # noqa: N803
             block_k: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(A_sparse, E) of a 2-D tensor A whose every group of 4 along a row holds at most 2 nonzeros (an error
    names the first group that holds more). The kept positions of a group with fewer nonzeros are its nonzeros
    then its first zeros. meta_dtype defaults to int32 for int8 A and int16 otherwise. block_m / block_k are
    upstream's tiling of its compress kernel: here they only have to divide A's shape."""
    if A.dim() != 2:
        raise ValueError(f"compress: A must be 2-D; got shape {tuple(A.shape)}")
    m, k = A.shape
    _sparse_dtype(A.dtype)
    if meta_dtype is None:
        meta_dtype = torch.int32 if A.dtype == torch.int8 else torch.int16
    factor = get_e_factor(A.dtype, meta_dtype)
    if k % factor:
        raise ValueError(f"compress: K = {k} must be a multiple of {factor} (A's elements per {meta_dtype} of E)")
    for name, block, size in (("block_m", block_m, m), ("block_k", block_k, k)):
        if block is not None and size % block:
            raise ValueError(f"compress: {name} = {block} must divide {size}")
    bits = A.view(torch.int8) if A.element_size() == 1 else A  # 8-bit floats: compared and gathered as bytes
    groups = bits.reshape(m, k // GROUP, GROUP)
    nonzero = groups != 0
    crowded = (nonzero.sum(-1) > KEPT).nonzero()
    if len(crowded):
        row, group = (int(x) for x in crowded[0])
        raise ValueError(f"compress: A is not 2:4 sparse: row {row}, elements {group * GROUP}..{group * GROUP + 3} "
                         f"hold {int(nonzero[row, group].sum())} nonzeros")
    # Kept positions: the nonzeros first, in order, then the lowest zeros (a stable sort of "is zero").
    order = torch.sort((~nonzero).to(torch.int8), dim=-1, stable=True).indices[..., :KEPT]
    order = torch.sort(order, dim=-1).values  # ascending positions within the group
    kept = groups.gather(-1, order).reshape(m, k // 2)
    A_sparse = kept.view(A.dtype) if bits is not A else kept  # noqa: N806
    chunks = (order[..., 0] | (order[..., 1] << 2)).to(torch.int64).reshape(m, k // factor, factor // GROUP)
    shifts = torch.arange(factor // GROUP, dtype=torch.int64, device=A.device) * BITS_PER_GROUP
    packed = (chunks << shifts).sum(-1)  # disjoint bit fields: the sum is their OR
    width = factor // GROUP * BITS_PER_GROUP
    if meta_dtype in (torch.int8, torch.int16, torch.int32):  # the packed bits, read as a signed integer
        packed = torch.where(packed >= 1 << (width - 1), packed - (1 << width), packed)
    return A_sparse.contiguous(), packed.to(meta_dtype)


torch_compress = compress  # upstream's pure-torch reference compressor: the same layout here


def _zero_two_of_four(tensor: torch.Tensor, dtype: torch.dtype, transposed: bool) -> torch.Tensor:
    m, k = tensor.shape
    groups = tensor.reshape(m, k // GROUP, GROUP)
    groups.scatter_(-1, groups.topk(GROUP - KEPT, dim=-1).indices, 0)
    tensor = groups.reshape(m, k)
    return (tensor.t().contiguous() if transposed else tensor).to(dtype)


def randn_semi_sparse(M: int, K: int, dtype: torch.dtype = torch.float16, device="cpu",  # noqa: N803
                      transposed: bool = False) -> torch.Tensor:
    """A random normal (M, K) tensor with 2 of every 4 consecutive elements of a row zero ((K, M) if transposed)."""
    _sparse_dtype(dtype)
    return _zero_two_of_four(torch.randn((M, K), dtype=torch.float32, device=device), dtype, transposed)


def randint_semi_sparse(M: int, K: int, low: int, high: int, dtype: torch.dtype = torch.int32, device="cpu",  # noqa: N803
                        transposed: bool = False) -> torch.Tensor:
    """A random integer (M, K) tensor in [low, high) with 2 of every 4 consecutive elements of a row zero."""
    return _zero_two_of_four(torch.randint(low, high, (M, K), dtype=torch.int64, device=device), dtype, transposed)


def arange_semi_sparse(M: int, K: int, dtype: torch.dtype = torch.float16, device="cpu",  # noqa: N803
                       transposed: bool = False) -> torch.Tensor:
    """0 .. M*K-1 laid out (M, K), with the 2 largest of every 4 consecutive elements of a row set to zero."""
    _sparse_dtype(dtype)
    return _zero_two_of_four(torch.arange(M * K, dtype=torch.float32, device=device).reshape(M, K), dtype, transposed)
