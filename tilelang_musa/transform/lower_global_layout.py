"""LowerGlobalLayout: a global tensor annotated with a Layout (`T.annotate_layout({K: layout})`) is read and
written through it: every access `K[x]` becomes `K[layout(x)]`.

The layout is a bijection over the tensor's elements (checked when annotated), so it renumbers them. Its output
coordinates are taken row-major over the layout's output shape and re-indexed into the tensor's own shape.
Runs after SafeMemoryAccess: bounds guards test the logical index against the logical shape (inside the tensor
maps inside it). Vector accesses stay correct where the layout breaks their contiguity: VectorizeLoop then
gathers the lanes one by one.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.attrs import ANNOTATIONS_ATTR
from ..ir.utils import TensorLoad, as_int, scope_of, substitute
from ..layout import Fragment
from .pass_base import tl_pass


def global_layouts(func: tirx.PrimFunc) -> dict:
    """Global tensor -> Layout, from the user's annotations."""
    if func.attrs is None or ANNOTATIONS_ATTR not in func.attrs:
        return {}
    return {buf: layout for buf, layout in func.attrs[ANNOTATIONS_ATTR].items()
            if not isinstance(layout, Fragment) and scope_of(buf) == "global"}


def keeps_rows(layout, shape: list[int]) -> bool:
    """Whether the layout moves whole rows only: element (r..., j) lives at row(r...) * D + j with row(r...)
    whole rows in (D the last extent). Runs along the last dimension are then runs of memory, aligned as without
    the layout (a copy may move them in pieces: inject_software_pipeline.py's LDLMS loads)."""
    fvars = list(layout.get_forward_vars())
    flat = _physical(layout, shape, fvars)
    offset = flat[0]
    for index, extent in zip(flat[1:], shape[1:]):
        offset = offset * extent + index
    ana = tvm.sym.Analyzer()
    for var, extent in zip(fvars, shape):
        ana.bind(var, tvm.ir.Range.from_min_extent(0, extent))
    last = fvars[-1]
    row_start = substitute(offset, {last: tirx.const(0, last.ty.dtype)})
    return bool(ana.can_prove_equal(offset - row_start, last)
                and ana.can_prove_equal(tirx.floormod(row_start, shape[-1]), 0))


def _physical(layout, shape: list[int], indices: list) -> list:
    out = layout.map(list(indices))
    out_shape = [as_int(e) for e in layout.output_shape]
    if out_shape == shape:
        return out
    flat = out[0]
    for coord, extent in zip(out[1:], out_shape[1:]):
        flat = flat * extent + coord
    physical = []
    for extent in reversed(shape[1:]):
        physical.append(tirx.floormod(flat, extent))
        flat = tirx.floordiv(flat, extent)
    return [flat, *reversed(physical)]


def lower_global_layout(func: tirx.PrimFunc) -> tirx.PrimFunc:
    layouts = global_layouts(func)
    if not layouts:
        return func
    shapes = {buf: [as_int(e) for e in buf.ty.shape] for buf in layouts}

    def on_store(node, mutator):
        node = mutator.default_mutate(node)
        if node.buffer in layouts:
            indices = _physical(layouts[node.buffer], shapes[node.buffer], node.indices)
            return tirx.BufferStore(node.buffer, node.value, indices)
        return node

    def on_load(node, mutator):
        node = mutator.default_mutate(node)
        if node.source in layouts:
            return tirx.BufferLoad(node.source, _physical(layouts[node.source], shapes[node.source], node.indices))
        return node

    body = tvm_ffi.structural_mutate(func.body, [(tirx.BufferStore, on_store), (TensorLoad, on_load)])
    return func.with_body(body)


def LowerGlobalLayout():  # noqa: N802
    return tl_pass("LowerGlobalLayout", lower_global_layout)
