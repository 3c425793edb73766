"""LowerBufferViews: an access to a `T.view` / `T.reshape` view becomes an access to the buffer it views.

    v = T.reshape(s, (4, 32))      # s: (128,)
    v[i, j]            ->   s[i * 32 + j]
    &v[i, j]           ->   &s[i * 32 + j]      (gemm / scan / atomic operands)

The element keeps its row-major position. Runs after every tile op is lowered (they may take views as
operands, read with the view's shape) and before the passes that reason about buffers: barriers, bounds
guards and shared-memory planning then see one buffer.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from ..language.view import VIEWS_ATTR
from .ir_utils import TensorLoad, flat_index, unflatten
from .pass_base import tl_pass


def lower_buffer_views(func: tirx.PrimFunc) -> tirx.PrimFunc:
    if func.attrs is None or VIEWS_ATTR not in func.attrs:
        return func
    views = dict(func.attrs[VIEWS_ATTR].items())
    ana = tvm.sym.Analyzer()

    def target(view, indices):
        source = views[view]
        while source in views:  # a view of a view
            source = views[source]
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
    return func.with_body(body).without_attr(VIEWS_ATTR)


def LowerBufferViews():  # noqa: N802
    return tl_pass("LowerBufferViews", lower_buffer_views)
