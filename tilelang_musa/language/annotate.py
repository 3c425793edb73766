"""`T.annotate_layout({buffer: layout})`: fix a buffer's layout before inference.

A Fragment fixes where a fragment's elements live (thread and slot); a Layout fixes how a shared tile is
stored (e.g. `tilelang.layout.make_sqmma_swizzled_layout(buf)`), or renumbers the elements of a global tensor
(every access `A[x]` reads `A[layout(x)]`, e.g. a row permutation). The map is recorded on the kernel (PrimFunc
attribute `tl.layout_annotations`) and read by LayoutInference, LowerSharedLayout and LowerGlobalLayout.
"""

from __future__ import annotations

from tvm import tirx

from ..layout import Fragment, Layout
from ..tileop.region import TensorRegion, is_buffer
from .builder import current_trace

ANNOTATIONS_ATTR = "tl.layout_annotations"


def annotate_layout(layout_map: dict, allow_buffer_region: bool = False, allow_reannotation: bool = False) -> None:
    trace = current_trace("T.annotate_layout")
    if trace.kernel is None:
        raise trace.error("`T.annotate_layout` must be used inside `with T.Kernel(...)`")
    for key, layout in layout_map.items():
        if isinstance(key, TensorRegion):
            if not allow_buffer_region:
                raise trace.error("T.annotate_layout: a buffer region was given; pass allow_buffer_region=True to "
                                  "annotate the region's buffer")
            key = key.source
        if not is_buffer(key):
            raise trace.error(f"T.annotate_layout: keys must be buffers; got {key!r}")
        scope = str(key.ty.storage_scope)
        if not isinstance(layout, Layout):
            raise trace.error(f"T.annotate_layout: the layout of `{key.name}` must be a T.Layout or T.Fragment; "
                              f"got {layout!r}")
        if scope == "local.fragment" and not isinstance(layout, Fragment):
            raise trace.error(f"T.annotate_layout: fragment `{key.name}` needs a T.Fragment (thread + slot)")
        if scope in ("shared", "shared.dyn", "global") and isinstance(layout, Fragment):
            raise trace.error(f"T.annotate_layout: {scope} buffer `{key.name}` needs a T.Layout, not a T.Fragment")
        if not all(isinstance(e, tirx.IntImm) for e in key.ty.shape):
            raise trace.error(f"T.annotate_layout: `{key.name}` has a shape known only at run time "
                              f"({list(key.ty.shape)}); layouts apply to buffers of constant shape")
        shape = [int(e) for e in key.ty.shape]
        if [int(e) for e in layout.input_shape] != shape:
            raise trace.error(f"T.annotate_layout: the layout's input shape {list(layout.input_shape)} differs from "
                              f"`{key.name}`'s shape {shape}")
        if scope == "global" and not layout.is_bijective():
            raise trace.error(f"T.annotate_layout: the layout of global tensor `{key.name}` must be a bijection onto "
                              f"its {layout.size()} elements (it renumbers them); got {layout!r}")
        if key in trace.layout_annotations and not allow_reannotation:
            raise trace.error(f"T.annotate_layout: `{key.name}` is already annotated; pass allow_reannotation=True "
                              "to replace its layout")
        trace.layout_annotations[key] = layout
