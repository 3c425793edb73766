"""LowerBufferViews: an access to a `T.view` / `T.reshape` view becomes an access to the buffer it views.

    v = T.reshape(s, (4, 32))      # s: (128,)
    v[i, j]            ->   s[i * 32 + j]
    &v[i, j]           ->   &s[i * 32 + j]      (gemm / scan / atomic operands)

The element keeps its row-major position. Runs after every tile op is lowered (they may take views as
operands, read with the view's shape) and before the passes that reason about buffers: barriers, bounds
guards and shared-memory planning then see one buffer. Views of fragments go earlier, before LayoutInference
(`scopes=FRAGMENT_VIEWS`): a loop over a reshaped fragment then reads the fragment itself, whose layout it follows
(`v[i]` -> `f[i // 32, i % 32]`). Views of global tensors go last, after SafeMemoryAccess: a bounds guard is
on the view's own shape (a tile wider than a view's row must not spill into the next row of the tensor).
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.attrs import VIEWS_ATTR
from ..ir.utils import TensorLoad, flat_index, unflatten
from .pass_base import tl_pass


FRAGMENT_VIEWS = ("local.fragment",)
ON_CHIP_VIEWS = ("local.fragment", "shared", "shared.dyn", "local")


def _root(views: dict, buffer):
    while buffer in views:  # a view of a view
        buffer = views[buffer]
    return buffer


def lower_buffer_views(func: tirx.PrimFunc, scopes: tuple[str, ...] | None = None) -> tirx.PrimFunc:
    """Lower the views of buffers in `scopes` (None: all views)."""
    if func.attrs is None or VIEWS_ATTR not in func.attrs:
        return func
    all_views = dict(func.attrs[VIEWS_ATTR].items())
    views = {v: s for v, s in all_views.items()
             if scopes is None or str(_root(all_views, s).ty.storage_scope) in scopes}
    if not views:
        return func
    remaining = {v: s for v, s in all_views.items() if v not in views}
    ana = tvm.sym.Analyzer()

    def target(view, indices):
        source = _root(views, view)
        flat = flat_index(view, indices)
        return source, [ana.simplify(i) for i in unflatten(flat, list(source.ty.shape))]

    def on_load(node, mutator):
        node = mutator.default_mutate(node)
        if node.source in views:
            source, indices = target(node.source, node.indices)
            return source[tuple(indices)]
        return node

    def on_store(node, mutator):
        node = mutator.default_mutate(node)
        if node.buffer in views:
            source, indices = target(node.buffer, node.indices)
            return tirx.BufferStore(source, node.value, indices)
        return node

    body = tvm_ffi.structural_mutate(func.body, [(TensorLoad, on_load), (tirx.BufferStore, on_store)])
    func = func.with_body(body)
    return func.with_attr(VIEWS_ATTR, remaining) if remaining else func.without_attr(VIEWS_ATTR)


def LowerBufferViews(scopes: tuple[str, ...] | None = None):  # noqa: N802
    return tl_pass("LowerBufferViews", lambda func: lower_buffer_views(func, scopes))
