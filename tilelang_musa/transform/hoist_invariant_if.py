"""HoistInvariantIf: `for i: if c: S [else: S2]` with `c` the same at every iteration becomes
`if c: for i: S [else: for i: S2]` (upstream issue 1734): the condition is evaluated once, and the loop left is
straight-line code that VectorizeLoop can turn into vector accesses (`B_local[0:4] = A_local[0:4]`).

`c` is the same at every iteration when it reads neither the loop variable nor a buffer the loop stores to (or one
that may share its memory: views are followed to the allocation or parameter they are declared on), and
neither `c` nor the loop calls anything that may write memory (a barrier, an atomic, a template taking an address).
The loop must run at least once (a constant extent of 1 or more): hoisted, `c` is evaluated even where the loop
would not have run, and a read in it might then be out of bounds. Thread-bound and parallel loops keep their body.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.utils import TensorLoad, Var, as_int, may_write_memory, scope_of, substitute
from .pass_base import tl_body_pass

_HOISTED_KINDS = (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED, tirx.ForKind.VECTORIZED)
def _storage_roots(body: Any) -> dict:
    """Each buffer of `body` -> what holds its elements: itself for an allocation, the pointer parameter or the
    allocation a view (DeclBuffer) is declared on, None for a view at a computed address (it may alias anything)."""
    roots: dict = {}

    def root(buffer: Any) -> Any:
        for known, value in roots.items():
            if known.same_as(buffer):
                return value
        return None

    def on_decl(node: Any) -> None:
        data = node.data
        if isinstance(data, Var) and not isinstance(data.ty, tirx.BufferType):
            roots[node.buffer] = data
        elif isinstance(data, tvm.ir.Call) and str(data.op.name) == "tirx.buffer_data":
            roots[node.buffer] = root(data.args[0])
        else:
            roots[node.buffer] = None

    def on_alloc(node: Any) -> None:
        roots[node.buffer] = node.buffer

    tvm_ffi.structural_walk(body, [(tirx.DeclBuffer, on_decl), (tirx.AllocBuffer, on_alloc)], order="pre")
    return roots


def _may_alias(a: Any, b: Any, roots: dict) -> bool:
    if a.same_as(b):
        return True
    ra = next((v for k, v in roots.items() if k.same_as(a)), None)
    rb = next((v for k, v in roots.items() if k.same_as(b)), None)
    if ra is None or rb is None:
        return scope_of(a) == scope_of(b)
    return ra.same_as(rb)


def _is_invariant(cond: Any, loop: Any, roots: dict) -> bool:
    read_buffers: list = []
    problems: list = []

    def on_var(var: Any) -> None:
        if var.same_as(loop.loop_var):
            problems.append(var)

    def on_call(call: Any) -> None:
        if may_write_memory(call):
            problems.append(call)

    tvm_ffi.structural_walk(cond, [(Var, on_var), (tvm.ir.Call, on_call),
                                   (TensorLoad, lambda load: read_buffers.append(load.source))])
    if problems:
        return False
    stored: list = []
    tvm_ffi.structural_walk(loop.body, [(tirx.BufferStore, lambda s: stored.append(s.buffer)),
                                        (tvm.ir.Call, lambda c: problems.append(c) if may_write_memory(c) else None)])
    return not problems and not any(_may_alias(r, s, roots) for r in read_buffers for s in stored)


def hoist_invariant_if(stmt: Any) -> Any:
    roots = _storage_roots(stmt)

    def on_for(node, mutator):
        node = mutator.default_mutate(node)
        if not isinstance(node, tirx.For) or not isinstance(node.body, tirx.IfThenElse):
            return node
        extent = as_int(node.extent)
        if node.kind not in _HOISTED_KINDS or node.thread_binding is not None or extent is None or extent < 1:
            return node
        branch = node.body
        if not _is_invariant(branch.condition, node, roots):
            return node

        def loop(var: Any, body: Any) -> Any:
            return tirx.For(var, node.min, node.extent, node.kind, body, node.thread_binding, node.annotations,
                            node.step, node.span)  # the user's lines stay on the loop and the branch

        other = None
        if branch.else_case is not None:  # a loop of its own: a variable is bound by one loop only
            var = Var(node.loop_var.name, str(node.loop_var.ty.dtype))
            other = loop(var, substitute(branch.else_case, {node.loop_var: var}))
        return tirx.IfThenElse(branch.condition, loop(node.loop_var, branch.then_case), other, branch.span)

    return tvm_ffi.structural_mutate(stmt, [(tirx.For, on_for)])


def HoistInvariantIf():  # noqa: N802
    return tl_body_pass("HoistInvariantIf", hoist_invariant_if)
