"""`make_cutlass_metadata_layout`: where NVIDIA's CUTLASS compressors put the elements of 2:4 metadata.

T.gemm_sp reads E logically: E[i, c] is the metadata integer of row i, K-columns c * e_factor onwards, in the
format of language/sparse_format.py. CUTLASS's compressors write the same integers in another order. Annotating
the metadata tensor with this layout (`T.annotate_layout({E: make_cutlass_metadata_layout(E, T.float16,
arch="8.0")})`) tells the kernel that order, as upstream does, and the product is right whichever compressor
wrote E. Only CUTLASS's sm8x order (torch's `to_sparse_semi_structured`, its
`sparse_semi_structured_from_dense_cutlass`) is provided; its sm90 order is what upstream's removed
`compress_sm90` wrote.
"""

from __future__ import annotations

import re
from typing import Any

from tvm import DataType

from ..errors import UnsupportedError
from .layout import Layout, LayoutError

SM8X_META_BITS = {"float16": 16, "bfloat16": 16, "float32": 16, "int8": 32, "uint8": 32, "float8_e4m3fn": 32,
                  "float8_e5m2": 32}  # the metadata integer width CUTLASS's sm8x sparse MMA takes per A dtype


def make_cutlass_metadata_layout(buffer: Any, mma_dtype: Any = "float16", arch: str | None = None,
                                 **extra_args: Any) -> Layout:
    """The layout of 2:4 metadata as CUTLASS's compressor for `arch` writes it, for `T.annotate_layout` on the
    metadata tensor (and, optionally, its shared tile). arch "8.0".."8.9": the sm8x ColumnMajorInterleaved order
    of torch's `to_sparse_semi_structured`. arch is required: MUSA has no CUDA architecture to default to."""
    if arch is None:
        raise LayoutError("make_cutlass_metadata_layout: pass arch (\"8.0\" for the metadata of "
                          "torch.sparse.to_sparse_semi_structured): the layout is that of NVIDIA's CUTLASS compressor "
                          "for a CUDA architecture, and a MUSA target has none to default to")
    major, minor = _compute_version(arch)
    if major >= 9:
        raise UnsupportedError(f"make_cutlass_metadata_layout(arch={arch!r}): CUTLASS's sm90 metadata layout (what "
                               "upstream's compress_sm90 wrote, removed in upstream 0.1.10) is not provided; compress "
                               "with tilelang.utils.sparse.compress (read as it is, no annotation) or take torch's "
                               "sm80 layout (arch=\"8.0\")")
    if major != 8:
        raise LayoutError(f"make_cutlass_metadata_layout: arch {arch!r} has no CUTLASS sparse metadata layout "
                          "(sm80 and later)")
    return _sm8x_layout(buffer, _dtype_name(mma_dtype))


def _compute_version(arch: Any) -> tuple[int, int]:
    found = re.fullmatch(r"(?:sm_?)?(\d+)\.?(\d)a?", str(arch).strip())
    if not found:
        raise LayoutError(f"make_cutlass_metadata_layout: arch {arch!r} is not a CUDA compute version such as \"8.0\"")
    return int(found.group(1)), int(found.group(2))


def _sm8x_layout(buffer: Any, mma_dtype: str) -> Layout:
    """CUTLASS's ColumnMajorInterleaved<2> order of an (m, n) metadata matrix, as torch's
    `_calculate_meta_reordering_scatter_offsets` computes it: rows regrouped in blocks of 32 (16-bit metadata)
    or 16 (32-bit), 2 x 2 blocks swapped across the diagonal, then column pairs stored one after another."""
    shape = [int(s) for s in buffer.ty.shape] if hasattr(buffer, "ty") else [int(s) for s in buffer.shape]
    meta_dtype = str(buffer.ty.dtype.dtype) if hasattr(buffer, "ty") else str(buffer.dtype)
    if mma_dtype not in SM8X_META_BITS:
        raise LayoutError(f"make_cutlass_metadata_layout: mma_dtype {mma_dtype} has no sm8x sparse MMA "
                          f"(one of {', '.join(SM8X_META_BITS)})")
    bits = SM8X_META_BITS[mma_dtype]
    if meta_dtype not in (f"int{bits}", f"uint{bits}"):
        raise LayoutError(f"make_cutlass_metadata_layout: the metadata of {mma_dtype} A is {bits}-bit for sm8x; got "
                          f"{meta_dtype}")
    rows_per_block, interweave = (32, 4) if bits == 16 else (16, 2)
    if len(shape) != 2 or shape[0] % rows_per_block or shape[1] % 2:
        raise LayoutError(f"make_cutlass_metadata_layout: the sm8x layout takes a 2-D metadata tensor with rows a "
                          f"multiple of {rows_per_block} and an even number of columns; got shape {shape}")
    m = shape[0]

    def offset(i: Any, j: Any) -> Any:
        # Row i goes to row r = i // B * B + i % 8 * interweave + i % B // 8 (B = rows_per_block); the 2 x 2 blocks
        # then swap their off-diagonal elements: element (r, j) of an even row and odd column goes to (r + 1, j - 1)
        # and one of an odd row and even column to (r - 1, j + 1). So the final column's parity is always r's (p)
        # and the final row is r - p + j % 2, where r - p = i // B * B + i % 8 * interweave + i % B // 16 * 2.
        parity = i % rows_per_block // 8 % 2
        row = i // rows_per_block * rows_per_block + i % 8 * interweave + i % rows_per_block // 16 * 2 + j % 2
        return j // 2 * m * 2 + row * 2 + parity

    return Layout(shape, offset)


def _dtype_name(dtype: Any) -> str:
    """TVM's name of `dtype`: a dtype string (T.float16 included), a tvm dtype or a torch dtype. (The language's
    canonical_dtype, with its aliases, lies in a layer above this one.)"""
    text = str.__str__(dtype) if isinstance(dtype, str) else str(dtype)
    return str(DataType(text.removeprefix("torch.")))
