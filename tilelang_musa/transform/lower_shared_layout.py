"""LowerSharedLayout: store shared tiles in their layout (e.g. an SQMMA swizzle).

A shared buffer with a Layout (from `T.annotate_layout`, or required by an op such as an SQMMA gemm and
recorded by LayoutInference) is replaced by a buffer shaped like the layout's output, and every access
`S[x]` becomes `S[layout.map(x)]`. Runs before loop partitioning, so the vectorizer sees the physical
(swizzled) addresses: a swizzle that keeps 16-byte pieces contiguous keeps the 128-bit accesses. In loops already
vectorized (LowerParallelLoop's, over a fragment's slots) the lane is moved out of the swizzle's xor, so such an
access stays one vector, not a gather. A
swizzled tile must start at a multiple of the swizzle's period (the hardware swizzles absolute
addresses): its allocation asks the shared-memory planner for that alignment.

A view of a tile as another dtype (ir/tile_views.py) is a name of its own over the tile's bytes: a layout annotated
on the view maps the view's accesses (its declaration takes the laid-out shape), the tile's own layout the tile's.
A layout the compiler would choose for a viewed tile (an op's requirement) is refused: the view's accesses would
read the bytes in an order its user never wrote.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..ir.attrs import ALIGNMENT_ANNOTATION, ANNOTATIONS_ATTR, DTYPE_VIEWS_ATTR, LAYOUTS_ATTR
from ..errors import CompileError
from ..ir.tile_views import shared_tile_views, viewed_buffer
from ..ir.utils import TensorLoad, as_int, loc_from_text, loc_of, scope_of, thread_info
from ..layout import Fragment, LayoutError
from ..layout.dtype_view import reinterpreted_layout
from ..tileop.loop_plan import hoist_lane_from_xor
from ..tileop.ptx_cp_async import check_copies
from .partition_parallel_loop import thread_analyzer
from .pass_base import tl_pass


SWIZZLE_ALIGNMENT = 4096  # the longest swizzle period (SG16 on 256-byte lines), see layout/swizzle.py


def shared_layouts(func: tirx.PrimFunc) -> dict:
    """Shared buffer -> Layout: the user's annotations, the layouts ops required, and the layouts of the views of
    another dtype of the tiles the user laid out, derived from the tile's (_derived_view_layouts)."""
    attrs = func.attrs
    out = {}
    for key in (ANNOTATIONS_ATTR, LAYOUTS_ATTR):
        if attrs is not None and key in attrs:
            out.update({buf: layout for buf, layout in attrs[key].items()
                        if not isinstance(layout, Fragment) and scope_of(buf) in ("shared", "shared.dyn")})
    if attrs is not None and ANNOTATIONS_ATTR in attrs:
        out.update(_derived_view_layouts(func, {b: out[b] for b in attrs[ANNOTATIONS_ATTR] if b in out}, out))
    return out


def _refuse_chosen_layouts_of_viewed_tiles(func: tirx.PrimFunc) -> None:
    """A layout an op required (not the user's annotation) on a tile that a view of another dtype also names."""
    if func.attrs is None or LAYOUTS_ATTR not in func.attrs:
        return
    views = shared_tile_views(func.body)
    if not views:
        return
    annotated = func.attrs[ANNOTATIONS_ATTR] if ANNOTATIONS_ATTR in func.attrs else {}
    for buf in func.attrs[LAYOUTS_ATTR]:
        if buf in annotated or scope_of(buf) not in ("shared", "shared.dyn"):
            continue
        view = next((v for v, tile in views.items() if tile.same_as(buf) or v.same_as(buf)), None)
        if view is not None:
            raise CompileError(
                f"T.view: shared tile `{buf.name}` is also named `{view.name}` ({view.ty.dtype.dtype}), but an op on "
                f"it needs `{buf.name}` stored in a layout of its own (a swizzle), which would reorder the bytes "
                f"`{view.name}` reads; annotate the layout of both names (T.annotate_layout), or copy into a tile of "
                "its own", _view_loc(func, view), stage="LowerSharedLayout")


def _derived_view_layouts(func: tirx.PrimFunc, annotated: dict, layouts: dict) -> dict:
    """A view of another dtype with no layout of its own (not in `layouts`), of a tile the user laid out (in
    `annotated`), reads the tile's bits where the tile's layout put them: its layout is derived from the tile's
    (layout/dtype_view.py, as upstream main derives it). A CompileError at the view where there is none."""
    derived = {}
    for view, tile in shared_tile_views(func.body).items() if annotated else ():
        if tile not in annotated or view in layouts:
            continue
        try:
            derived[view] = reinterpreted_layout(annotated[tile], str(tile.ty.dtype.dtype), list(view.ty.shape),
                                                 str(view.ty.dtype.dtype))
        except LayoutError as err:
            raise CompileError(
                f"T.view: shared tile `{tile.name}` is stored in the layout annotated on it (T.annotate_layout), and "
                f"its view `{view.name}` as {view.ty.dtype.dtype} has no layout of its own, nor one derived from "
                f"`{tile.name}`'s: {err}; annotate `{view.name}`'s layout too, or leave `{tile.name}`'s out",
                _view_loc(func, view)) from None
    return derived


def _view_loc(func: tirx.PrimFunc, view):
    """Where the user wrote the T.view of `view` (else the first loop that accesses it)."""
    if DTYPE_VIEWS_ATTR in func.attrs:
        text = next((str(loc) for v, loc in func.attrs[DTYPE_VIEWS_ATTR].items() if v.same_as(view)), None)
        if text:
            return loc_from_text(text)
    return _first_loop_using(func.body, view)


def _first_loop_using(body, buffer):
    """The source location of the first loop (with one) whose body accesses `buffer`: the user's line."""
    found: list = []

    def on_for(loop):
        loc = loc_of(loop)
        if found or loc is None:
            return
        uses = []
        tvm_ffi.structural_walk(loop.body, [
            (TensorLoad, lambda n: uses.append(n) if n.source.same_as(buffer) else None),
            (tirx.BufferStore, lambda n: uses.append(n) if n.buffer.same_as(buffer) else None)])
        if uses:
            found.append(loc)

    tvm_ffi.structural_walk(body, [(tirx.For, on_for)], order="pre")
    return found[0] if found else None


def lower_shared_layout(func: tirx.PrimFunc) -> tirx.PrimFunc:
    layouts = shared_layouts(func)
    target = func.attrs["target"] if func.attrs is not None and "target" in func.attrs else None
    check_copies(func.body, layouts, thread_info(func), target)  # T.ptx_cp_async's
    if not layouts:
        return func
    _refuse_chosen_layouts_of_viewed_tiles(func)
    replacement = {}
    for buf, layout in layouts.items():
        shape = [as_int(e) for e in layout.output_shape]
        new = Tb.buffer(shape, str(buf.ty.dtype.dtype), scope=scope_of(buf))
        IRBuilder.name(buf.name, new)
        replacement[buf] = new

    def on_alloc(node, mutator):
        if node.buffer not in replacement:
            return node
        annotations = dict(node.annotations or {})
        annotations[ALIGNMENT_ANNOTATION] = SWIZZLE_ALIGNMENT
        return tirx.AllocBuffer(replacement[node.buffer], annotations)

    def on_decl(node, mutator):  # a view with a layout of its own: declared with the laid-out shape
        tile = viewed_buffer(node)
        data = node.data if tile not in replacement else tvm.ir.Call(node.data.op, [replacement[tile]])
        if node.buffer in replacement:
            return tirx.DeclBuffer(replacement[node.buffer], data=data)
        return node if data.same_as(node.data) else tirx.DeclBuffer(node.buffer, data=data)

    analyzer = thread_analyzer(thread_info(func))()
    lanes: list = []  # the vectorized loops around: (lane, width)

    def physical(buf, indices) -> list:
        mapped = layouts[buf].map(list(indices), analyzer)
        for lane, width in lanes:
            mapped = [hoist_lane_from_xor(i, lane, width, analyzer) for i in mapped]
        return mapped

    def on_for(node, mutator):
        width = as_int(node.extent)
        if node.kind != tirx.ForKind.VECTORIZED or width is None:
            return mutator.default_mutate(node)
        analyzer.bind(node.loop_var, tvm.ir.Range(0, width))
        lanes.append((node.loop_var, width))
        try:
            return mutator.default_mutate(node)
        finally:
            lanes.pop()

    def on_store(node, mutator):
        node = mutator.default_mutate(node)
        if node.buffer in replacement:
            return tirx.BufferStore(replacement[node.buffer], node.value, physical(node.buffer, node.indices))
        return node

    def on_load(node, mutator):
        node = mutator.default_mutate(node)
        if node.source in replacement:
            return replacement[node.source][tuple(physical(node.source, node.indices))]
        return node

    body = tvm_ffi.structural_mutate(func.body, [(tirx.AllocBuffer, on_alloc), (tirx.DeclBuffer, on_decl),
                                                 (tirx.For, on_for),
                                                 (tirx.BufferStore, on_store), (TensorLoad, on_load)])
    return tirx.PrimFunc(func.params, body, ret_type=func.ret_type, attrs=func.attrs)


def LowerSharedLayout():  # noqa: N802
    return tl_pass("LowerSharedLayout", lower_shared_layout)
