"""Shared-memory layouts: the MUSA xor swizzles (SQMMA operands, TME boxes), row-major and padded.

Every shared-memory layout here maps a buffer's logical coordinates to one output, the element offset in the
buffer's storage. A swizzled layout stores the tile densely, then permutes it the way the hardware permutes
byte addresses (MUSA_LAYOUTS.md sections 3 and 4), with line `SL`, stride `SS` and granularity `SG` bytes:

    phys(a) = a ^ (((a >> log2 SL) & (SS / SG - 1)) << log2 SG)          (SQMMA: SS = SL = 256)

i.e. within each SL-byte line, the SG-byte chunks [SS-byte window] are xor-ed with the line number modulo
SS/SG. The hardware applies it to the *absolute* shared-memory address, so a buffer with a swizzled layout must
start at a multiple of `swizzle_alignment(SG, SS, SL)` = SL * SS / SG bytes (4096 for SG16 with 256-byte
lines, 2048 for SG32, 1024 for SG64): then the address relative to the buffer gives the same permutation.

SQMMA reads an operand through a descriptor whose row pitch (leading stride) is a power of two from 8 to 256
bytes, so a tile whose contiguous (last) dimension is wider than 256 bytes is stored as column blocks of
`continuity` elements: block b holds columns [b * continuity, (b + 1) * continuity) of every row, densely,
and blocks follow each other. Leading dimensions beyond the last two (pipeline stages) select whole tiles, each
padded to a multiple of the swizzle's period so that every tile starts where the pattern starts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._buffer import buffer_shape_dtype, dtype_bits
from ._expr import Expr, as_expr, const_int, make_vars
from ._reuse import reuse_layout
from .layout import Layout, LayoutError

SWIZZLE_LINE = 256  # bytes: the SQMMA swizzle line and stride (fixed by the hardware)
GRANULARITIES = (0, 16, 32, 64)  # bytes; 0 = no swizzle
_DESCRIPTOR_CODE = {0: 0, 16: 1, 32: 2, 64: 3}  # SQMMA descriptor bits [21, 23)


def _log2(value: int, what: str) -> int:
    if value <= 0 or value & (value - 1):
        raise LayoutError(f"{what} must be a power of two, got {value}")
    return value.bit_length() - 1


def swizzle_bytes(address: Any, granularity: int, stride: int = SWIZZLE_LINE, line: int = SWIZZLE_LINE) -> Any:
    """The swizzled byte address (int, numpy array or index expression); granularity 0 is the identity."""
    if granularity == 0:
        return address
    _check_geometry(granularity, stride, line)
    return address ^ (((address >> _log2(line, "line")) & (stride // granularity - 1)) << _log2(granularity, "SG"))


def swizzle_alignment(granularity: int, stride: int = SWIZZLE_LINE, line: int = SWIZZLE_LINE) -> int:
    """Bytes a swizzled buffer's start must be a multiple of (the period of the swizzle pattern)."""
    if granularity == 0:
        return 1
    _check_geometry(granularity, stride, line)
    return line * (stride // granularity)


def sqmma_descriptor_swizzle_code(granularity: int) -> int:
    """The SQMMA descriptor's swizzle field (bits [21, 23)) for a granularity in bytes."""
    if granularity not in _DESCRIPTOR_CODE:
        raise LayoutError(f"SQMMA swizzle granularity must be one of {GRANULARITIES} bytes, got {granularity}")
    return _DESCRIPTOR_CODE[granularity]


def canonical_sqmma_granularity(element_bits: int, k_major: bool) -> int:
    """MUSA_LAYOUTS section 3: K-major operands SG16; MN-major SG16 for 8-bit, SG32 for 16-bit, SG64 for 32-bit."""
    if k_major:
        return 16
    choice = {8: 16, 16: 32, 32: 64}.get(element_bits)
    if choice is None:
        raise LayoutError(f"SQMMA has no MN-major operand of {element_bits}-bit elements (8, 16 or 32)")
    return choice


def _check_geometry(granularity: int, stride: int, line: int) -> None:
    if granularity not in GRANULARITIES:
        raise LayoutError(f"swizzle granularity must be one of {GRANULARITIES} bytes, got {granularity}")
    _log2(stride, "swizzle stride")
    _log2(line, "swizzle line")
    if not granularity < stride <= line:
        raise LayoutError(f"swizzle needs granularity < stride <= line, got SG={granularity} SS={stride} SL={line}")


def _matrix_shape(shape: list[Any], what: str) -> tuple[list[int], int, int]:
    ints = [const_int(e) for e in shape]
    if any(e is None or e <= 0 for e in ints):
        raise LayoutError(f"{what}: the shape must be positive constants, got {shape}")
    if len(ints) == 1:
        return [], 1, ints[0]
    return ints[:-2], ints[-2], ints[-1]


def make_xor_swizzle_layout(shape: Any, dtype: str, granularity: int, *, continuity: int | None = None,
                            stride: int = SWIZZLE_LINE, line: int = SWIZZLE_LINE) -> Layout:
    """The tile `shape` of `dtype`, stored densely in column blocks of `continuity` elements (default: the whole
    last dim), then byte-swizzled with granularity/stride/line (see the module docstring)."""
    shape = [shape] if isinstance(shape, int) else list(shape)
    arguments = (*shape, granularity, continuity, stride, line)
    if all(type(x) is int for x in arguments if x is not None) and isinstance(dtype, str):
        return reuse_layout(("xor swizzle", tuple(shape), dtype, granularity, continuity, stride, line),
                            lambda: _xor_swizzle_layout(shape, dtype, granularity, continuity, stride, line))
    return _xor_swizzle_layout(shape, dtype, granularity, continuity, stride, line)


def _xor_swizzle_layout(shape: list, dtype: Any, granularity: int, continuity: int | None, stride: int,
                        line: int) -> Layout:
    what = "make_xor_swizzle_layout"
    lead, rows, cols = _matrix_shape(shape, what)
    bits = dtype_bits(dtype)
    if bits % 8:
        raise LayoutError(f"{what}: {dtype} elements are not whole bytes")
    elem = bits // 8
    if granularity:
        _check_geometry(granularity, stride, line)
        if granularity < elem:
            raise LayoutError(f"{what}: a {granularity}-byte swizzle would split {elem}-byte {dtype} elements")
    cont = cols if continuity is None else continuity
    if not isinstance(cont, int) or cont <= 0 or cols % cont:
        raise LayoutError(f"{what}: continuity {continuity!r} must divide the last dim {cols}")
    total = int(np.prod(shape, dtype=np.int64)) * elem
    if granularity and total % line:
        raise LayoutError(f"{what}: the tile {shape} of {dtype} is {total} bytes, not a whole number of "
                          f"{line}-byte swizzle lines")

    fvars = make_vars(len(shape))
    r, c = (fvars[-2] if len(shape) > 1 else as_expr(0)), fvars[-1]
    tile: Expr = as_expr(0)
    for var, extent in zip(fvars, lead):
        tile = tile * extent + var
    # dense: tile, then column block, then row, then column within the block
    within = (c // cont) * (rows * cont) + r * cont + c % cont

    def swizzled(x):
        return x ^ ((x // (line // elem)) % (stride // granularity)) * (granularity // elem) if granularity else x

    # Leading dims (pipeline stages) select whole tiles, each starting at a multiple of the swizzle's period (padded
    # if smaller): the address of a tile is then its start, swizzled alike, as an SQMMA descriptor or a TME box
    # that starts there reads and writes it.
    period = swizzle_alignment(granularity, stride, line) // elem if granularity else 1
    tile_stride = -(-(rows * cols) // period) * period
    x = tile * tile_stride + swizzled(within)
    return Layout.from_exprs(shape, fvars, [x])


def make_sqmma_swizzled_layout(buffer: Any, continuity: int | None = None, k_major: bool = True) -> Layout:
    """The shared-memory layout SQMMA reads an operand tile in (user API, like upstream's
    make_wgmma_swizzled_layout): the canonical granularity of MUSA_LAYOUTS section 3 for the element width and
    major-ness, the 256-byte line, and column blocks of `continuity` elements along the contiguous (last) dim.

    `buffer`: a shared buffer (or region, or `(shape, dtype)`) whose last dim is contiguous: K for a K-major
    operand, M or N for an MN-major one. `continuity` defaults to the whole last dim if it spans at most 256
    bytes, else 256 bytes of it; the block row pitch (continuity * element bytes) must be a power of two from 8
    to 256 bytes, the descriptor's leading stride. The buffer must start at a multiple of
    `swizzle_alignment(granularity)` bytes.
    """
    what = "make_sqmma_swizzled_layout"
    shape, dtype = buffer_shape_dtype(buffer, what)
    lead, rows, cols = _matrix_shape(shape, what)
    bits = dtype_bits(dtype)
    if bits not in (8, 16, 32):
        raise LayoutError(f"{what}: SQMMA operands are 8-, 16- or 32-bit, got {dtype}")
    elem = bits // 8
    if continuity is None:
        continuity = cols if cols * elem <= SWIZZLE_LINE else SWIZZLE_LINE // elem
    pitch = continuity * elem
    if pitch < 8 or pitch > SWIZZLE_LINE or pitch & (pitch - 1):
        raise LayoutError(f"{what}: a row of {continuity} {dtype} elements is {pitch} bytes; the SQMMA "
                          "descriptor's leading stride must be a power of two from 8 to 256 bytes")
    granularity = canonical_sqmma_granularity(bits, k_major)
    return make_xor_swizzle_layout(shape, dtype, granularity, continuity=continuity)


def make_swizzled_layout(buffer: Any, k_major: bool = True, allow_pad: bool = True) -> Layout:
    """Upstream's generic swizzle entry point: on MUSA the SQMMA layout (bank-conflict free for 16-byte
    accesses, and readable by SQMMA). `allow_pad` is accepted for compatibility; no padding is used."""
    return make_sqmma_swizzled_layout(buffer, k_major=k_major)


def make_wgmma_swizzled_layout(buffer: Any, continuity: int | None = None, k_major: bool = True) -> Layout:
    """Upstream (Hopper) spelling of make_sqmma_swizzled_layout, so upstream-style scripts run unchanged."""
    return make_sqmma_swizzled_layout(buffer, continuity=continuity, k_major=k_major)


def make_linear_layout(buffer: Any) -> Layout:
    """Row-major storage: the element offset of `x` is its row-major linear index."""
    shape = _shape_of(buffer, "make_linear_layout")
    fvars = make_vars(len(shape))
    flat: Expr = as_expr(0)
    for var, extent in zip(fvars, shape):
        flat = flat * extent + var
    return Layout.from_exprs(shape, fvars, [flat])


def make_padded_layout(buffer: Any, pad: int | None = None) -> Layout:
    """Row-major storage with each row of the last dim padded by `pad` elements (default: 16 bytes' worth), so
    that column accesses by consecutive threads hit different banks. Not a bijection: the padding is unused."""
    shape, dtype = buffer_shape_dtype(buffer, "make_padded_layout")
    if pad is None:
        pad = max(1, 128 // dtype_bits(dtype))
    if not isinstance(pad, int) or pad < 0:
        raise LayoutError(f"make_padded_layout: pad must be a non-negative int, got {pad!r}")
    _, _, cols = _matrix_shape(shape, "make_padded_layout")
    fvars = make_vars(len(shape))
    rows: Expr = as_expr(0)
    for var, extent in zip(fvars[:-1], shape[:-1]):
        rows = rows * extent + var
    return Layout.from_exprs(shape, fvars, [rows * (cols + pad) + fvars[-1]])


def _shape_of(buffer: Any, what: str) -> list[Any]:
    if isinstance(buffer, (list, tuple)) and not (len(buffer) == 2 and isinstance(buffer[1], str)):
        return list(buffer)
    if isinstance(buffer, int):
        return [buffer]
    return buffer_shape_dtype(buffer, what)[0]


# ---- upstream's bank swizzles (32-, 64-, 128-byte) ----------------------------------------------------------------

def _bank_swizzled(what: str, bits: int, buffer: Any, cols: Any = None, element_size: Any = None) -> Layout:
    """The 16-byte chunks of each row, in groups of 2**bits chunks, xor-ed with the row's place in its 8-row period:
    chunk c of row s goes to chunk c ^ (s >> (3 - bits)) (mod 2**bits). Rows are stored in 8-row periods; a period
    holds one group of every row, the groups of a row following each other period by period. Upstream's
    make_{quarter,half,full}_bank_swizzled_layout, taking a buffer or (rows, cols, element_bits). They are tuned
    for NVIDIA's 32 banks of 4 bytes (MUSA's bank geometry is not documented to this project); any of them is a
    valid shared-memory layout for T.copy and T.Parallel here, while SQMMA and TME read the layouts of
    make_sqmma_swizzled_layout."""
    if cols is not None or element_size is not None:
        shape, bits_per_elem = [buffer, cols], int(element_size)
    else:
        shape, dtype = buffer_shape_dtype(buffer, what)
        bits_per_elem = dtype_bits(dtype)
    if len(shape) < 2:
        raise LayoutError(f"{what}: the buffer must have at least 2 dimensions, got {shape}")
    lead, rows, cols = _matrix_shape(list(shape), what)
    if 128 % bits_per_elem:
        raise LayoutError(f"{what}: {bits_per_elem}-bit elements do not fill 16-byte chunks")
    vec = 128 // bits_per_elem  # elements of a 16-byte chunk
    group = 1 << bits  # chunks swizzled together
    if not (rows == 4 or rows % 8 == 0):
        raise LayoutError(f"{what}: the rows ({rows}) must be a multiple of 8 (or 4: half a period)")
    if cols % (vec * group):
        raise LayoutError(f"{what}: the last dim ({cols}) must be a multiple of {vec * group} ({group} chunks of "
                          f"16 bytes)")
    fvars = make_vars(2)
    i, j = fvars
    period, s = i // 8, i % 8
    chunk = j // vec
    swizzled = (chunk % group) ^ ((s >> (3 - bits)) % group)
    within = j % vec + (swizzled + s * group) * vec  # inside one 8-row period of one group
    periods = -(-rows // 8)
    offset = ((chunk // group) * periods + period) * (8 * group * vec) + within
    # leading dims (stages) pass through as outputs of their own, as Layout.expand and upstream's expansion give them
    return Layout.from_exprs([rows, cols], fvars, [offset]).expand(lead)


def make_quarter_bank_swizzled_layout(buffer: Any, cols: Any = None, element_size: Any = None) -> Layout:
    """32-byte swizzle: pairs of 16-byte chunks, swapped in rows 4..7 of every 8 (see _bank_swizzled)."""
    return _bank_swizzled("make_quarter_bank_swizzled_layout", 1, buffer, cols, element_size)


def make_half_bank_swizzled_layout(buffer: Any, cols: Any = None, element_size: Any = None) -> Layout:
    """64-byte swizzle: groups of 4 chunks, xor-ed with (row % 8) // 2 (see _bank_swizzled)."""
    return _bank_swizzled("make_half_bank_swizzled_layout", 2, buffer, cols, element_size)


def make_full_bank_swizzled_layout(buffer: Any, cols: Any = None, element_size: Any = None) -> Layout:
    """128-byte swizzle: groups of 8 chunks, xor-ed with row % 8 (see _bank_swizzled)."""
    return _bank_swizzled("make_full_bank_swizzled_layout", 3, buffer, cols, element_size)
