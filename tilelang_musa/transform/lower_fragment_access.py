"""LowerFragmentAccess: a fragment becomes each thread's local array of its slots.

After LayoutInference every fragment `G` (logical shape, scope local.fragment) has a layout F, and every
loop over it runs on the thread that holds the element it touches. Here `G` is replaced by a per-thread
array `G[F.local_size]` (scope local) and each access `G[x]` by `G[F.index(x)]`, simplified under the loop
and thread ranges (for a loop that walks G's own layout the slot simplifies back to the loop's slot).
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..errors import CompileError
from ..ir.attrs import LAYOUTS_ATTR
from ..ir.ops import FRAGMENT_PTR_OP
from ..ir.utils import TensorLoad, as_int
from ..layout import Fragment
from .pass_base import tl_pass


def lower_fragment_access(func: tirx.PrimFunc) -> tirx.PrimFunc:
    if func.attrs is None or LAYOUTS_ATTR not in func.attrs:
        return func
    layouts = {buf: layout for buf, layout in func.attrs[LAYOUTS_ATTR].items() if isinstance(layout, Fragment)}
    replacement = {}
    for buf, layout in layouts.items():
        size = as_int(layout.local_size)
        if size is None:
            raise CompileError(f"fragment `{buf.name}` has a symbolic per-thread size", stage="LowerFragmentAccess")
        local = Tb.buffer((size,), str(buf.ty.dtype.dtype), scope="local")
        IRBuilder.name(buf.name, local)
        replacement[buf] = local
    ana = tvm.sym.Analyzer()

    def slot(buf, indices):
        return ana.simplify(layouts[buf].index(list(indices)))

    def on_attr(node, mutator):
        if node.attr_key == "thread_extent":
            ana.bind(node.node.var, tvm.ir.Range(0, node.value))
        return mutator.default_mutate(node)

    def on_for(node, mutator):
        ana.bind(node.loop_var, tvm.ir.Range.from_min_extent(node.min, node.extent))
        return mutator.default_mutate(node)

    def on_alloc(node, mutator):
        if node.buffer in replacement:
            return tirx.AllocBuffer(replacement[node.buffer], node.annotations)
        return node

    def on_store(node, mutator):
        node = mutator.default_mutate(node)
        if node.buffer in replacement:
            return tirx.BufferStore(replacement[node.buffer], node.value, [slot(node.buffer, node.indices)])
        return node

    def on_load(node, mutator):
        node = mutator.default_mutate(node)
        if node.source in replacement:
            return replacement[node.source][slot(node.source, node.indices)]
        return node

    def on_call(node, mutator):
        if isinstance(node.op, tvm.ir.Op) and str(node.op.name) == FRAGMENT_PTR_OP:
            return tirx.address_of(replacement[node.args[0]][0])
        return mutator.default_mutate(node)

    body = tvm_ffi.structural_mutate(func.body, [
        (tirx.AttrStmt, on_attr), (tirx.For, on_for), (tirx.AllocBuffer, on_alloc),
        (tirx.BufferStore, on_store), (TensorLoad, on_load), (tvm.ir.Call, on_call)])
    return tirx.PrimFunc(func.params, body, ret_type=func.ret_type, attrs=func.attrs).without_attr(LAYOUTS_ATTR)


def LowerFragmentAccess():  # noqa: N802
    return tl_pass("LowerFragmentAccess", lower_fragment_access)
