"""The body T.gemm_sp builds: a 2:4 sparse tile and its metadata expanded into a dense shared tile
(sparse_format.py describes the metadata). Its own module because the macro is written in the language it is part
of; it imports the language's modules it uses, not the package (which imports gemm_sp)."""

from __future__ import annotations

from typing import Any

from .loop import Parallel
from .math import cast, if_then_else
from .prim_func import macro
from .sparse_format import BITS_PER_GROUP


@macro
def decompress(A_sparse, E, A_dense, m, k, factor, kept, group, a_transposed, e_transposed, dtype):
    if a_transposed:  # the dense tile in A's orientation (K, M)
        for j, i in Parallel(k, m):
            chunk = metadata_chunk(E, i, j, factor, group, e_transposed)
            A_dense[j, i] = dense_element(A_sparse, chunk, i, j, kept, group, a_transposed, dtype)
    else:
        for i, j in Parallel(m, k):
            chunk = metadata_chunk(E, i, j, factor, group, e_transposed)
            A_dense[i, j] = dense_element(A_sparse, chunk, i, j, kept, group, a_transposed, dtype)


def metadata_chunk(E: Any, i: Any, j: Any, factor: int, group: int, e_transposed: bool) -> Any:  # noqa: N803
    """The 4-bit metadata of the group of A[i, j] (row i, column j along K)."""
    e_column = j // factor
    meta = E[e_column, i] if e_transposed else E[i, e_column]
    return (cast(meta, "int32") >> (j % factor // group * BITS_PER_GROUP)) & 15


def dense_element(A_sparse: Any, chunk: Any, i: Any, j: Any, kept: int, group: int, a_transposed: bool,  # noqa: N803
                  dtype: str) -> Any:
    """A[i, j]: the kept element whose position in its group the chunk names, else 0."""
    positions_per_element = 4 // group  # a chunk names 2 of 4 positions: 1 per 8/16-bit element, 2 per 32-bit one
    first = (j // group) * kept
    value = cast(0, dtype)
    for slot in reversed(range(kept)):  # slot 0 wins if the metadata names one position twice
        position = chunk >> 2 if slot else chunk & 3  # the chunk has 4 bits: its top two need no mask
        if positions_per_element != 1:
            position = position // positions_per_element
        column = first + slot
        kept_value = A_sparse[column, i] if a_transposed else A_sparse[i, column]
        value = if_then_else(j % group == position, kept_value, value)
    return value
