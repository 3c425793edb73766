"""LowerSharedLayout: store annotated shared tiles in their layout (e.g. an SQMMA swizzle).

A shared buffer with a Layout from `T.annotate_layout` is replaced by a buffer shaped like the layout's
output, and every access `S[x]` becomes `S[layout.map(x)]`. Runs before loop partitioning, so the
vectorizer sees the physical (swizzled) addresses: a swizzle that keeps 16-byte pieces contiguous keeps
the 128-bit accesses.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..language.annotate import ANNOTATIONS_ATTR
from ..layout import Fragment
from .ir_utils import TensorLoad, as_int, scope_of
from .pass_base import tl_pass


def lower_shared_layout(func: tirx.PrimFunc) -> tirx.PrimFunc:
    if func.attrs is None or ANNOTATIONS_ATTR not in func.attrs:
        return func
    layouts = {buf: layout for buf, layout in func.attrs[ANNOTATIONS_ATTR].items()
               if not isinstance(layout, Fragment) and scope_of(buf) in ("shared", "shared.dyn")}
    if not layouts:
        return func
    replacement = {}
    for buf, layout in layouts.items():
        shape = [as_int(e) for e in layout.output_shape]
        new = Tb.buffer(shape, str(buf.ty.dtype.dtype), scope=scope_of(buf))
        IRBuilder.name(buf.name, new)
        replacement[buf] = new

    def on_alloc(node, mutator):
        return tirx.AllocBuffer(replacement[node.buffer], node.annotations) if node.buffer in replacement else node

    def on_store(node, mutator):
        node = mutator.default_mutate(node)
        if node.buffer in replacement:
            return tirx.BufferStore(replacement[node.buffer], node.value, layouts[node.buffer].map(list(node.indices)))
        return node

    def on_load(node, mutator):
        node = mutator.default_mutate(node)
        if node.source in replacement:
            return replacement[node.source][tuple(layouts[node.source].map(list(node.indices)))]
        return node

    body = tvm_ffi.structural_mutate(func.body, [(tirx.AllocBuffer, on_alloc), (tirx.BufferStore, on_store),
                                                 (TensorLoad, on_load)])
    return tirx.PrimFunc(func.params, body, func.ret_type, func.attrs)


def LowerSharedLayout():  # noqa: N802
    return tl_pass("LowerSharedLayout", lower_shared_layout)
