"""Upstream TileLang's `tilelang.intrinsics` swizzle helpers: index maps for shared tiles, usable with
`T.annotate_layout` on any arch (they only permute where elements sit in shared memory).

    get_swizzle_layout(i, j, row_size, dtype)  -> (column tile, row, swizzled column)
    make_mma_swizzle_layout(shared_buf)        -> a T.Layout of that map, or the identity where rows are too short

The swizzle XORs a row's 16-byte vector index with its row number (mod 8): each group of 8 consecutive rows
reads a column of 16-byte vectors from 8 different banks groups. CUDA's ldmatrix / mma emitters
(TensorCoreIntrinEmitter, ...) are not here: MUSA's matrix instructions are reached through T.gemm.
"""

from __future__ import annotations

from typing import Any

import tvm

from ..layout import Layout

_VECTOR_BYTES = 16
_ROWS = 8  # a swizzle pattern repeats every 8 rows


def get_swizzle_layout(row_idx: Any, col_idx: Any, row_size: int, dtype: Any, swizzle_bytes: int | None = None):
    """Where element (row_idx, col_idx) of a tile with `row_size` elements of `dtype` a row goes:
    `(column tile, row, column within the tile)`. A column tile is `swizzle_bytes` wide (default: the row, at
    most 128 bytes); inside it, the 16-byte vector index is XORed with the row's place in its group of rows."""
    bits = tvm.DataType(str(dtype)).bits
    row_bytes = bits * int(row_size) // 8
    if row_bytes % 32:
        raise ValueError(f"get_swizzle_layout: a row of {row_size} x {dtype} is {row_bytes} bytes; it must be a "
                         "multiple of 32 bytes")
    swizzle_bytes = min(128, row_bytes) if swizzle_bytes is None else int(swizzle_bytes)
    if swizzle_bytes not in (32, 64, 128):
        raise ValueError(f"get_swizzle_layout: swizzle_bytes must be 32, 64 or 128; got {swizzle_bytes}")
    per_vector = _VECTOR_BYTES * 8 // bits
    vectors = swizzle_bytes // _VECTOR_BYTES  # 2, 4 or 8 vectors a column tile
    vector, lane = col_idx // per_vector, col_idx % per_vector
    # With fewer than 8 vectors a tile row, 8 // vectors consecutive rows share one XOR value.
    phase = (row_idx % _ROWS) // (_ROWS // vectors)
    return vector // vectors, row_idx, ((vector % vectors) ^ phase) * per_vector + lane


def make_mma_swizzle_layout(shared_buf: Any, is_smooth: bool = False) -> Layout:
    """The swizzled layout of `shared_buf` (its last two dims; rows of a multiple of 64 bytes), or the identity
    with `is_smooth=True` or shorter rows."""
    shape = list(shared_buf.shape)
    dtype = shared_buf.dtype if isinstance(shared_buf.dtype, str) else str(shared_buf.dtype)
    bits = tvm.DataType(dtype).bits
    row = int(shape[-1])
    if is_smooth or row * bits % 512:
        return Layout(shape, lambda *idx: list(idx))

    def forward(*idx: Any) -> list[Any]:
        return [*idx[:-2], *get_swizzle_layout(idx[-2], idx[-1], row, dtype)]

    return Layout(shape, forward)


__all__ = ["get_swizzle_layout", "make_mma_swizzle_layout"]
