"""The body T.gemm_sp builds: a 2:4 sparse tile and its metadata expanded into a dense shared tile (gemm_sp.py
describes the metadata). Its own module because the macro is written in the language it is part of; it imports the
language's modules it uses, not the package (which imports gemm_sp)."""

from .loop import Parallel
from .math import cast, if_then_else
from .prim_func import macro


@macro
def decompress(A_sparse, E, A_dense, m, k, factor, dtype):
    for i, j in Parallel(m, k):
        chunk = (cast(E[i, j // factor], "int32") >> (j % factor // 4 * 4)) & 15
        group = j // 4
        A_dense[i, j] = if_then_else(
            j % 4 == (chunk & 3), A_sparse[i, group * 2],
            if_then_else(j % 4 == (chunk >> 2), A_sparse[i, group * 2 + 1], cast(0, dtype)))
