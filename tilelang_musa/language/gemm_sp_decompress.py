"""The body T.gemm_sp builds: a 2:4 sparse tile and its metadata expanded into a dense shared tile (gemm_sp.py
describes the metadata). Its own module because the macro is written in the language it is part of."""

import tilelang_musa.language as T


@T.macro
def decompress(A_sparse, E, A_dense, m, k, factor, dtype):
    for i, j in T.Parallel(m, k):
        chunk = (T.cast(E[i, j // factor], "int32") >> (j % factor // 4 * 4)) & 15
        group = j // 4
        A_dense[i, j] = T.if_then_else(
            j % 4 == (chunk & 3), A_sparse[i, group * 2],
            T.if_then_else(j % 4 == (chunk >> 2), A_sparse[i, group * 2 + 1], T.cast(0, dtype)))
