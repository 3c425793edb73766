"""`plot_layout(layout)`: a picture of where a layout puts each element, drawn with matplotlib.

- A `Fragment` is drawn as its logical 2-D grid, each cell coloured by the thread holding it and labelled
  `T<thread>:<slot>` (a replicated element lists its replicas' threads).
- A `Layout` is drawn over its input (logical) grid, each cell labelled with its physical offset and coloured by
  it, or with `view="output"` over the physical grid, each cell labelled with the logical coordinates stored there.
- `banks=True` with the tile's `dtype` draws a shared-memory layout's banks instead: each cell coloured by the bank
  its element sits in, bank = (byte address / 4) % 32 (the simulator's and ChooseSharedSwizzle's model of MUSA shared
  memory: 32 banks of 4 bytes, docs/PERF_FACTS.md; `banks=16` or `bank_bytes=` for another), labelled `b<bank>` in
  the input view. Over each column the input view names the worst conflict of reading that column at once ("4x":
  four distinct words in one bank), so a swizzle's effect shows: row-major fp16 64-wide rows read down a column are
  8x, the 128-byte bank swizzle 1x. `bank_grid(layout, dtype)` returns the banks without drawing.

Files go to `<save_directory>/<name>.<format>` for each of `formats` ("pdf", "png", "svg", "all", or a
comma-separated list). Layouts of more than two dimensions are drawn with their leading dimensions folded into
the rows (`grid_shape=` chooses another 2-D shape for the input view). matplotlib is needed
(`pip install matplotlib`).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import tvm

from ..layout._expr import grid
from ..layout.fragment import Fragment
from ..layout.layout import Layout
from ..transform.choose_shared_swizzle import BANK_BYTES, BANKS

_FORMATS = ("pdf", "png", "svg")


def plot_layout(layout: Any, save_directory: str = "./tmp", name: str = "layout", colormap: str | None = None,
                verbose: bool = False, formats: str | list[str] = "pdf", view: str = "input",
                grid_shape: tuple[int, int] | None = None, banks: bool | int = False, dtype: Any = None,
                bank_bytes: int = BANK_BYTES) -> list[str]:
    """Draw `layout` (a Layout or Fragment with constant shapes) and return the paths written. `banks` (True: 32,
    or a number of banks) with `dtype` (the tile's element type, "float16") draws a Layout's shared-memory banks."""
    if not isinstance(layout, Layout):
        raise TypeError(f"plot_layout expects a T.Layout or T.Fragment, got {type(layout).__name__}")
    if view not in ("input", "output"):
        raise ValueError(f"plot_layout: view must be 'input' or 'output', got {view!r}")
    if not layout.is_static:
        raise ValueError(f"plot_layout: the layout's shapes must be constants to draw it: {layout}")
    bank_count = _bank_count(banks)
    if bank_count and isinstance(layout, Fragment):
        raise ValueError("plot_layout: banks= draws a shared-memory Layout; a Fragment's elements live in registers")
    try:
        # A Figure of its own (not pyplot): nothing to close, and the user's matplotlib backend is left alone.
        from matplotlib.figure import Figure
    except ImportError as err:
        raise ImportError("plot_layout draws with matplotlib: pip install matplotlib") from err

    ways = None  # the input view's worst bank conflict of each column
    norm = {}
    if bank_count:
        labels, colors, ways = _bank_cells(layout, dtype, bank_count, bank_bytes, view, grid_shape)
        title = (f"{name}: banks of {dtype} elements, bank = (byte address / {bank_bytes}) % {bank_count}"
                 + ("" if view == "input" else " (physical grid)"))
        colormap = colormap or _bank_colormap(bank_count)
        norm = {"vmin": -0.5, "vmax": bank_count - 0.5}  # each bank its own colour, whatever the grid holds
    elif isinstance(layout, Fragment):
        labels, colors = _fragment_cells(layout)
        title = f"{name}: {layout.num_threads} threads, {layout.local_size} slots each"
        colormap = colormap or "RdPu"
    elif view == "input":
        labels, colors = _input_cells(layout, grid_shape)
        title = f"{name}: logical grid, physical offsets"
        colormap = colormap or "Spectral"
    else:
        labels, colors = _output_cells(layout)
        title = f"{name}: physical grid, logical coordinates"
        colormap = colormap or "Spectral"
    if verbose:
        for (r, c), label in np.ndenumerate(labels):
            print(f"({r}, {c}) -> {label}")

    rows, cols = labels.shape
    fig = Figure(figsize=(max(4.0, cols * 0.6), max(3.0, rows * 0.4)))
    ax = fig.subplots()
    ax.imshow(np.ma.masked_invalid(colors.astype(float)), cmap=colormap, aspect="auto", **norm)
    font = max(3.0, min(8.0, 60.0 / max(rows, cols) ** 0.5))
    for (r, c), label in np.ndenumerate(labels):
        ax.text(c, r, label, ha="center", va="center", fontsize=font)
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    ax.tick_params(labelsize=font)
    if ways is not None:
        top = ax.secondary_xaxis("top")
        top.set_xticks(range(cols), [f"{w}x" for w in ways], fontsize=font)
        top.set_xlabel("worst bank conflict of a column read at once", fontsize=font + 1)
        if verbose:
            print("column conflicts: " + " ".join(f"{w}x" for w in ways))
    ax.set_title(title, fontsize=9, pad=24 if ways is not None else 6)
    os.makedirs(save_directory, exist_ok=True)
    paths = [os.path.join(save_directory, f"{name}.{fmt}") for fmt in _parse_formats(formats)]
    for path in paths:
        fig.savefig(path, bbox_inches="tight", dpi=200)
    return paths


def bank_grid(layout: Layout, dtype: Any, banks: int = BANKS, bank_bytes: int = BANK_BYTES,
              grid_shape: tuple[int, int] | None = None) -> np.ndarray:
    """The bank of each element of a shared tile stored by `layout` over its logical grid (2-D as plot_layout draws
    it): (byte address / bank_bytes) % banks, the byte address being the physical offset times `dtype`'s size."""
    return _words(layout, dtype, bank_bytes, grid_shape) % banks


def _words(layout: Layout, dtype: Any, bank_bytes: int, grid_shape: tuple[int, int] | None) -> np.ndarray:
    """Each element's 4-byte (bank_bytes) word of shared memory, over the logical grid."""
    if dtype is None:
        raise ValueError("plot_layout: banks= needs the tile's dtype (dtype='float16'): the layout counts elements")
    bits = tvm.runtime.DataType(str(dtype)).bits
    offsets = _grid(_physical_offsets(layout), grid_shape, layout)
    return offsets * bits // (8 * bank_bytes)


def _bank_count(banks: bool | int) -> int:
    if banks is True:
        return BANKS
    if banks is False or banks is None:
        return 0
    if isinstance(banks, int) and banks > 0:
        return banks
    raise ValueError(f"plot_layout: banks must be True, False or a number of banks, got {banks!r}")


def _bank_colormap(banks: int) -> Any:
    """A distinct colour for each of `banks` banks (tab20 and tab20b, repeated past 40)."""
    from matplotlib import colormaps
    from matplotlib.colors import ListedColormap

    palette = list(colormaps["tab20"].colors) + list(colormaps["tab20b"].colors)
    return ListedColormap([palette[k % len(palette)] for k in range(banks)])


def _bank_cells(layout: Layout, dtype: Any, banks: int, bank_bytes: int, view: str,
                grid_shape: tuple[int, int] | None) -> tuple[np.ndarray, np.ndarray, list[int] | None]:
    words = _words(layout, dtype, bank_bytes, grid_shape)
    bank = words % banks
    if view == "output":
        labels, order = _output_cells(layout)
        colors = np.full(order.shape, np.nan)
        placed = ~np.isnan(order)
        colors[placed] = bank.reshape(-1)[order[placed].astype(np.int64)]
        return labels, colors, None
    labels = np.vectorize(lambda b: f"b{b}", otypes=[object])(bank)
    return labels, bank, [_worst_conflict(words[:, c], banks) for c in range(words.shape[1])]


def _worst_conflict(words: np.ndarray, banks: int) -> int:
    """The most distinct words one bank holds among `words` (elements read at once): 1 is conflict-free."""
    distinct = np.unique(words)
    return int(np.bincount(distinct % banks, minlength=banks).max())


def _grid(values: np.ndarray, grid_shape: tuple[int, int] | None, layout: Layout) -> np.ndarray:
    values = values.reshape(-1)
    rows, cols = grid_shape if grid_shape is not None else _as_2d(layout.input_shape)
    if rows * cols != values.size:
        raise ValueError(f"plot_layout: grid_shape {grid_shape} does not hold the layout's {values.size} elements")
    return values.reshape(rows, cols)


def _parse_formats(formats: str | list[str]) -> list[str]:
    items = formats.split(",") if isinstance(formats, str) else list(formats)
    out: list[str] = []
    for item in (i.strip().lower() for i in items):
        if item == "all":
            out.extend(_FORMATS)
        elif item in _FORMATS:
            out.append(item)
        else:
            raise ValueError(f"plot_layout: unknown format {item!r} (use pdf, png, svg or all)")
    return list(dict.fromkeys(out))


def _as_2d(shape: list[int]) -> tuple[int, int]:
    if len(shape) == 1:
        return 1, shape[0]
    return int(np.prod(shape[:-1])), shape[-1]


def _fragment_cells(frag: Fragment) -> tuple[np.ndarray, np.ndarray]:
    thread, slot = frag.evaluate_all()  # input_shape + [replicas]
    rows, cols = _as_2d(frag.input_shape)
    thread = thread.reshape(rows, cols, -1)
    slot = slot.reshape(rows, cols, -1)
    labels = np.empty((rows, cols), dtype=object)
    for r in range(rows):
        for c in range(cols):
            owners = "/".join(str(t) for t in thread[r, c])
            labels[r, c] = f"T{owners}:{slot[r, c, 0]}"
    return labels, thread[:, :, 0]


def _physical_offsets(layout: Layout) -> np.ndarray:
    """Each logical element's physical coordinates, flattened row-major over the output shape."""
    outputs = layout.evaluate(*grid(layout.input_shape))
    flat = np.zeros(np.shape(outputs[0]), dtype=np.int64)
    for values, extent in zip(outputs, layout.output_shape):
        flat = flat * int(extent) + np.asarray(values, dtype=np.int64)
    return flat


def _input_cells(layout: Layout, grid_shape: tuple[int, int] | None) -> tuple[np.ndarray, np.ndarray]:
    offsets = _grid(_physical_offsets(layout), grid_shape, layout)
    return offsets.astype(str).astype(object), offsets


def _output_cells(layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    offsets = _physical_offsets(layout).reshape(-1)
    rows, cols = _as_2d([int(e) for e in layout.output_shape])
    labels = np.full(rows * cols, "", dtype=object)
    colors = np.full(rows * cols, np.nan)
    coords = np.stack([c.reshape(-1) for c in grid(layout.input_shape)], axis=1)
    for k, (offset, coord) in enumerate(zip(offsets, coords)):
        labels[offset] = ",".join(map(str, coord))
        colors[offset] = k
    return labels.reshape(rows, cols), colors.reshape(rows, cols)
