"""The layout of a view of a laid-out tile as another dtype (`T.view(s, shape, dtype)` of a swizzled tile).

The view names the tile's bits: its logical element v is bits [v * sv, (v + 1) * sv) of the tile read in the
tile's logical (row-major) order, where the tile's element e (st bits) lives at physical element P(e) of the
storage. The view's layout maps v to the physical view element holding those bits:

- narrower or equal (st = k * sv): v is part r = v % k of tile element e = v // k, at physical view element
  P(e) * k + r; any tile layout has such a view.
- wider (sv = k * st): v is the tile elements e0 = v * k .. e0 + k - 1, which must lie at consecutive physical
  elements starting at a multiple of k, P(e0 + j) = P(e0) + j; then it is physical view element P(e0) // k.
  A swizzle permutes 16-byte chunks, so a view whose elements are whole parts of a chunk (at most 16 bytes, k
  dividing the chunk's elements) has one; checked on every element (the shapes are constant).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ._buffer import dtype_bits
from ._expr import analyzer_for, const_int, grid, make_vars
from .layout import Layout, LayoutError


def _ravel(indices: Sequence[Any], shape: Sequence[Any]) -> Any:
    flat: Any = 0
    for index, extent in zip(indices, shape):
        flat = flat * extent + index
    return flat


def _unravel(flat: Any, shape: Sequence[Any]) -> list[Any]:
    out = []
    for extent in reversed(shape[1:]):
        out.append(flat % extent)
        flat = flat // extent
    return [flat] + list(reversed(out))


def _physical_flat(layout: Layout) -> np.ndarray:
    """P(e) for every logical element e of a constant-shaped layout, in row-major order of its input."""
    flat = np.zeros(int(np.prod(layout.input_shape, dtype=np.int64)), dtype=np.int64)
    for value, extent in zip(layout.evaluate(*grid(layout.input_shape)), layout.output_shape):
        flat = flat * int(extent) + np.asarray(value, dtype=np.int64).reshape(-1)
    return flat


def reinterpreted_layout(tile_layout: Layout, tile_dtype: str, view_shape: Sequence[Any], view_dtype: str) -> Layout:
    """The view's layout (one output: the physical element of the view's dtype); LayoutError saying why there
    is none (element sizes that do not divide, a wider view whose elements the tile's layout splits)."""
    st, sv = dtype_bits(tile_dtype), dtype_bits(view_dtype)
    shape = [const_int(e) if const_int(e) is not None else e for e in view_shape]
    if not tile_layout.is_static or any(not isinstance(e, int) for e in shape):
        raise LayoutError("the tile's or the view's shape is not constant")
    tile_shape = [int(e) for e in tile_layout.input_shape]
    out_shape = [int(e) for e in tile_layout.output_shape]
    fvars = make_vars(len(shape))
    v = _ravel(fvars, shape)
    analyzer = analyzer_for(dict(zip(fvars, shape)))
    if st % sv == 0:
        k = st // sv
        physical = _ravel(tile_layout.map(_unravel(v // k, tile_shape), analyzer), out_shape) * k + v % k
        return Layout.from_exprs(shape, fvars, [physical])
    if sv % st:
        raise LayoutError(f"{view_dtype} ({sv} bits) and {tile_dtype} ({st} bits) elements do not divide each other")
    k = sv // st
    flat = _physical_flat(tile_layout)
    if flat.size % k:
        raise LayoutError(f"the tile's {flat.size} elements are not a whole number of {view_dtype} elements")
    groups = flat.reshape(-1, k)
    split = np.flatnonzero((groups[:, 0] % k != 0) | np.any(groups != groups[:, :1] + np.arange(k), axis=1))
    if split.size:
        e0 = int(split[0]) * k
        raise LayoutError(f"the tile's layout does not keep each {view_dtype} element's {k} {tile_dtype} elements "
                          f"together (tile elements {e0} .. {e0 + k - 1}, coordinates "
                          f"{tuple(int(x) for x in np.unravel_index(e0, tile_shape))}, are stored at "
                          f"{', '.join(str(int(p)) for p in groups[split[0]])})")
    physical = _ravel(tile_layout.map(_unravel(v * k, tile_shape), analyzer), out_shape) // k
    return Layout.from_exprs(shape, fvars, [physical])
