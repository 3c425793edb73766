"""`plot_layout(layout)`: a picture of where a layout puts each element, drawn with matplotlib.

- A `Fragment` is drawn as its logical 2-D grid, each cell coloured by the thread holding it and labelled
  `T<thread>:<slot>` (a replicated element lists its replicas' threads).
- A `Layout` is drawn over its input (logical) grid, each cell labelled with its physical offset and coloured by
  it, or with `view="output"` over the physical grid, each cell labelled with the logical coordinates stored there.

Files go to `<save_directory>/<name>.<format>` for each of `formats` ("pdf", "png", "svg", "all", or a
comma-separated list). Layouts of more than two dimensions are drawn with their leading dimensions folded into
the rows (`grid_shape=` chooses another 2-D shape for the input view). matplotlib is needed
(`pip install matplotlib`).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..layout.fragment import Fragment
from ..layout.layout import Layout, grid

_FORMATS = ("pdf", "png", "svg")


def plot_layout(layout: Any, save_directory: str = "./tmp", name: str = "layout", colormap: str | None = None,
                verbose: bool = False, formats: str | list[str] = "pdf", view: str = "input",
                grid_shape: tuple[int, int] | None = None) -> list[str]:
    """Draw `layout` (a Layout or Fragment with constant shapes) and return the paths written."""
    if not isinstance(layout, Layout):
        raise TypeError(f"plot_layout expects a T.Layout or T.Fragment, got {type(layout).__name__}")
    if view not in ("input", "output"):
        raise ValueError(f"plot_layout: view must be 'input' or 'output', got {view!r}")
    if not layout.is_static:
        raise ValueError(f"plot_layout: the layout's shapes must be constants to draw it: {layout}")
    try:
        # A Figure of its own (not pyplot): nothing to close, and the user's matplotlib backend is left alone.
        from matplotlib.figure import Figure
    except ImportError as err:
        raise ImportError("plot_layout draws with matplotlib: pip install matplotlib") from err

    if isinstance(layout, Fragment):
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
    ax.imshow(np.ma.masked_invalid(colors.astype(float)), cmap=colormap, aspect="auto")
    font = max(3.0, min(8.0, 60.0 / max(rows, cols) ** 0.5))
    for (r, c), label in np.ndenumerate(labels):
        ax.text(c, r, label, ha="center", va="center", fontsize=font)
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    ax.tick_params(labelsize=font)
    ax.set_title(title, fontsize=9)
    os.makedirs(save_directory, exist_ok=True)
    paths = [os.path.join(save_directory, f"{name}.{fmt}") for fmt in _parse_formats(formats)]
    for path in paths:
        fig.savefig(path, bbox_inches="tight", dpi=200)
    return paths


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
    offsets = _physical_offsets(layout).reshape(-1)
    rows, cols = grid_shape if grid_shape is not None else _as_2d(layout.input_shape)
    if rows * cols != offsets.size:
        raise ValueError(f"plot_layout: grid_shape {grid_shape} does not hold the layout's {offsets.size} elements")
    offsets = offsets.reshape(rows, cols)
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
