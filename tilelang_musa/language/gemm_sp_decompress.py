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
            A_dense[j, i] = dense_element(A_sparse, E, i, j, factor, kept, group, a_transposed, e_transposed, dtype)
    else:
        for i, j in Parallel(m, k):
            A_dense[i, j] = dense_element(A_sparse, E, i, j, factor, kept, group, a_transposed, e_transposed, dtype)


def dense_element(A_sparse: Any, E: Any, i: Any, j: Any, factor: int, kept: int, group: int,  # noqa: N803
                  a_transposed: bool, e_transposed: bool, dtype: str) -> Any:
    """A[i, j] (row i, column j along K): the kept element whose position in its group the metadata names,
    else 0."""
    e_column = j // factor
    meta = E[e_column, i] if e_transposed else E[i, e_column]
    chunk = (cast(meta, "int32") >> (j % factor // group * BITS_PER_GROUP)) & 15
    positions_per_element = 4 // group  # a chunk names 2 of 4 positions: 1 per 8/16-bit element, 2 per 32-bit one
    first = (j // group) * kept
    value = cast(0, dtype)
    for slot in reversed(range(kept)):  # slot 0 wins if the metadata names one position twice
        position = (chunk >> (2 * slot) if slot else chunk) & 3
        if positions_per_element != 1:
            position = position // positions_per_element
        column = first + slot
        kept_value = A_sparse[column, i] if a_transposed else A_sparse[i, column]
        value = if_then_else(j % group == position, kept_value, value)
    return value
