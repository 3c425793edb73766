"""HoistInvariantIf: `for i: if c: S [else: S2]` with `c` the same at every iteration becomes
`if c: for i: S [else: for i: S2]` (upstream issue 1734): the condition is evaluated once, and the loop left is
straight-line code that VectorizeLoop can turn into vector accesses (`B_local[0:4] = A_local[0:4]`).

`c` is the same at every iteration when it reads neither the loop variable nor a buffer the loop stores to, and
neither `c` nor the loop calls anything that may write memory (a barrier, an atomic, a template taking an address).
The loop must run at least once (a constant extent of 1 or more): hoisted, `c` is evaluated even where the loop
would not have run, and a read in it might then be out of bounds. Thread-bound and parallel loops keep their body.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.utils import TensorLoad, Var, as_int, substitute
from .pass_base import tl_body_pass

_HOISTED_KINDS = (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED, tirx.ForKind.VECTORIZED)
_READS_STATE = 2  # TCallEffectKind: kExprAnnotation 0, kPure 1, kReadState 2; above it a call may write


def _writes_memory(call: Any) -> bool:
    op = call.op
    if not isinstance(op, tvm.ir.Op):
        return True
    effect = op.get_attr("TCallEffectKind")
    return effect is None or int(effect) > _READS_STATE


def _is_invariant(cond: Any, loop: Any) -> bool:
    read_buffers: list = []
    problems: list = []

    def on_var(var: Any) -> None:
        if var.same_as(loop.loop_var):
            problems.append(var)

    def on_call(call: Any) -> None:
        if _writes_memory(call):
            problems.append(call)

    tvm_ffi.structural_walk(cond, [(Var, on_var), (tvm.ir.Call, on_call),
                                   (TensorLoad, lambda load: read_buffers.append(load.source))])
    if problems:
        return False
    stored: list = []
    tvm_ffi.structural_walk(loop.body, [(tirx.BufferStore, lambda s: stored.append(s.buffer)),
                                        (tvm.ir.Call, lambda c: problems.append(c) if _writes_memory(c) else None)])
    return not problems and not any(r.same_as(s) for r in read_buffers for s in stored)


def hoist_invariant_if(stmt: Any) -> Any:
    def on_for(node, mutator):
        node = mutator.default_mutate(node)
        if not isinstance(node, tirx.For) or not isinstance(node.body, tirx.IfThenElse):
            return node
        extent = as_int(node.extent)
        if node.kind not in _HOISTED_KINDS or node.thread_binding is not None or extent is None or extent < 1:
            return node
        branch = node.body
        if not _is_invariant(branch.condition, node):
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
