"""2:4 structured sparsity for `T.gemm_sp`, under upstream's import path `tilelang.utils.sparse`.

`compress(A)` splits a dense (M, K) tensor into its kept elements (M, K/2) and their metadata E (M, K/get_e_factor)
in the format T.gemm_sp reads (language/sparse_format.py): of every 4 consecutive elements of a row at most 2 are
nonzero (of every 2, at most 1 for float32). `randn_semi_sparse` & co. make test inputs with that sparsity.
"""

from __future__ import annotations

import torch

from ..errors import UnsupportedError
from ..language.dtypes import canonical_dtype
from ..language.sparse_format import (BITS_PER_GROUP, GROUP_CONFIG, SPARSE_DTYPES, default_meta_dtype,  # noqa: F401
                                      get_e_factor, get_e_replicate_factor, sparse_group)

POSITIONS = 4  # a metadata chunk names 2 of 4 positions of 16 bits


def _sparse_dtype(a_dtype) -> str:
    name = canonical_dtype(a_dtype)
    if name not in SPARSE_DTYPES:
        raise UnsupportedError(f"2:4 sparsity: A of dtype {name} is not supported (one of {', '.join(SPARSE_DTYPES)})")
    return name


def compress(A: torch.Tensor, meta_dtype: torch.dtype | None = None, block_m: int | None = None,  # noqa: N803
             block_k: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(A_sparse, E) of a 2-D tensor A whose every group along a row (4 elements; 2 for float32) holds at most
    2 nonzeros (1 for float32); an error names the first group that holds more. The kept positions of a group
    with fewer nonzeros are its nonzeros then its first zeros. meta_dtype defaults to int32 for int8 A and int16
    otherwise. block_m / block_k are upstream's tiling of its compress kernel: here they only have to divide A's
    shape."""
    if A.dim() != 2:
        raise ValueError(f"compress: A must be 2-D; got shape {tuple(A.shape)}")
    m, k = A.shape
    kept_count, group = sparse_group(_sparse_dtype(A.dtype))
    if meta_dtype is None:
        meta_dtype = getattr(torch, default_meta_dtype(A.dtype))
    factor = get_e_factor(A.dtype, meta_dtype)
    if k % factor:
        raise ValueError(f"compress: K = {k} must be a multiple of {factor} (A's elements per {meta_dtype} of E)")
    for name, block, size in (("block_m", block_m, m), ("block_k", block_k, k)):
        if block is not None and size % block:
            raise ValueError(f"compress: {name} = {block} must divide {size}")
    bits = A.view(torch.int8) if A.element_size() == 1 else A  # 8-bit floats: compared and gathered as bytes
    groups = bits.reshape(m, k // group, group)
    nonzero = groups != 0
    crowded = (nonzero.sum(-1) > kept_count).nonzero()
    if len(crowded):
        row, first = int(crowded[0][0]), int(crowded[0][1]) * group
        raise ValueError(f"compress: A is not {kept_count}:{group} sparse: row {row}, elements "
                         f"{first}..{first + group - 1} hold {int(nonzero[row, first // group].sum())} nonzeros")
    # Kept elements: the nonzeros first, in order, then the lowest zeros (a stable sort of "is zero").
    order = torch.sort((~nonzero).to(torch.int8), dim=-1, stable=True).indices[..., :kept_count]
    order = torch.sort(order, dim=-1).values  # ascending within the group
    kept = groups.gather(-1, order).reshape(m, k * kept_count // group)
    A_sparse = kept.view(A.dtype) if bits is not A else kept  # noqa: N806
    # The chunk's two positions, in 16-bit units: a 32-bit element spans two.
    span = POSITIONS // group
    positions = (order.unsqueeze(-1) * span + torch.arange(span, device=A.device)).reshape(m, k // group, 2)
    chunks = (positions[..., 0] | (positions[..., 1] << 2)).to(torch.int64).reshape(m, k // factor, factor // group)
    shifts = torch.arange(factor // group, dtype=torch.int64, device=A.device) * BITS_PER_GROUP
    packed = (chunks << shifts).sum(-1)  # disjoint bit fields: the sum is their OR
    width = factor // group * BITS_PER_GROUP
    if meta_dtype in (torch.int8, torch.int16, torch.int32):  # the packed bits, read as a signed integer
        packed = torch.where(packed >= 1 << (width - 1), packed - (1 << width), packed)
    return A_sparse.contiguous(), packed.to(meta_dtype)


torch_compress = compress  # upstream's pure-torch reference compressor: the same format here


def _zero_unkept(tensor: torch.Tensor, dtype: torch.dtype, transposed: bool) -> torch.Tensor:
    """Zero the largest group - kept elements of each group of a row (A's dtype's group; 2 of 4 for a dtype
    2:4 sparsity does not take, such as randint's default int32)."""
    name = canonical_dtype(dtype)
    kept, group = sparse_group(name) if name in SPARSE_DTYPES else (2, POSITIONS)
    m, k = tensor.shape
    groups = tensor.reshape(m, k // group, group)
    groups.scatter_(-1, groups.topk(group - kept, dim=-1).indices, 0)
    tensor = groups.reshape(m, k)
    return (tensor.t().contiguous() if transposed else tensor).to(dtype)


def randn_semi_sparse(M: int, K: int, dtype: torch.dtype = torch.float16, device="cpu",  # noqa: N803
                      transposed: bool = False) -> torch.Tensor:
    """A random normal (M, K) tensor with 2 of every 4 consecutive elements of a row zero (1 of 2 for float32;
    (K, M) if transposed)."""
    _sparse_dtype(dtype)
    return _zero_unkept(torch.randn((M, K), dtype=torch.float32, device=device), dtype, transposed)


def randint_semi_sparse(M: int, K: int, low: int, high: int, dtype: torch.dtype = torch.int32, device="cpu",  # noqa: N803
                        transposed: bool = False) -> torch.Tensor:
    """A random integer (M, K) tensor in [low, high) with 2 of every 4 consecutive elements of a row zero."""
    return _zero_unkept(torch.randint(low, high, (M, K), dtype=torch.int64, device=device), dtype, transposed)


def arange_semi_sparse(M: int, K: int, dtype: torch.dtype = torch.float16, device="cpu",  # noqa: N803
                       transposed: bool = False) -> torch.Tensor:
    """0 .. M*K-1 laid out (M, K), with the largest of every group of a row set to zero (2 of 4; 1 of 2 for
    float32)."""
    _sparse_dtype(dtype)
    return _zero_unkept(torch.arange(M * K, dtype=torch.float32, device=device).reshape(M, K), dtype, transposed)


# Compressors of earlier upstream releases (0.1.6-0.1.9) that wrote NVIDIA CUTLASS's interleaved metadata through a
# CUDA extension; upstream 0.1.13 has neither. Importing one says what to use instead.
_REMOVED = {
    "compress_sm90": "CUTLASS's sm90 sparse GMMA metadata (a CUDA extension; see make_cutlass_metadata_layout)",
    "compress_sm80": "CUTLASS's sm80 metadata through torch.sparse.to_sparse_semi_structured (on CPU, torch's "
                     "sparse_semi_structured_from_dense_cutlass writes it: annotate E with "
                     "tilelang.layout.make_cutlass_metadata_layout(E, dtype, arch=\"8.0\"))",
}


def __getattr__(name: str):
    if name in _REMOVED:
        raise ImportError(f"tilelang.utils.sparse.{name} is not provided: upstream removed it in 0.1.10 (0.1.13 has "
                          f"none) and Moore Threads' tree has none; it wrote {_REMOVED[name]}. Use "
                          f"tilelang.utils.sparse.compress(A), whose metadata T.gemm_sp reads as it is")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
