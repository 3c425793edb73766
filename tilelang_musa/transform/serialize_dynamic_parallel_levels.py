"""SerializeDynamicParallelLevels: the outer levels of a T.Parallel nest over fragments whose extents are known only
at run time, and whose loop variables index no fragment, become serial loops that every thread runs.

    for i in T.Parallel(n):          # n = T.dynamic("n"); i indexes no fragment
        for j in T.Parallel(64):     ->   for i in T.serial(n):
            frag[j] = ...                     for j in T.Parallel(64): frag[j] = ...

A fragment nest is placed on the threads by its fragments' layouts, which know nothing of `i`: each thread runs
every `i` for the `j` it owns, so each iteration still runs once (upstream TileLang accepts these nests too). A
level whose variable does index a fragment stays parallel, and LayoutInference rejects its run-time extent.
Runs before LayoutInference, which plans the remaining (static) nest.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from ..ir.attrs import PARALLEL
from ..ir.utils import as_int, collect_accesses, scope_of
from .pass_base import tl_pass

FRAGMENT_SCOPE = "local.fragment"


def _is_parallel(node: Any) -> bool:
    return isinstance(node, tirx.For) and node.annotations is not None and PARALLEL in node.annotations


def _uses(expr: Any, var: tirx.Var) -> bool:
    found = []
    tvm_ffi.structural_walk(expr, [(tirx.Var, lambda v: found.append(True) if v.same_as(var) else None)])
    return bool(found)


def _on_for(node: tirx.For, mutator: Any) -> Any:
    if not _is_parallel(node) or as_int(node.extent) is not None:
        return mutator.default_mutate(node)
    fragments = [a for a in collect_accesses(node.body) if scope_of(a.buffer) == FRAGMENT_SCOPE]
    inner = node.body
    while isinstance(inner, tirx.AttrStmt):
        inner = inner.body
    if not fragments or not _is_parallel(inner) or any(_uses(i, node.loop_var) for a in fragments for i in a.indices):
        return mutator.default_mutate(node)  # nothing to gain, or `i` places fragment elements: left to the check
    annotations = {k: v for k, v in node.annotations.items() if k != PARALLEL}
    body = mutator.mutate(node.body)
    return tirx.For(node.loop_var, node.min, node.extent, tirx.ForKind.SERIAL, body, None, annotations)


def _serialize(stmt: Any) -> Any:
    return tvm_ffi.structural_mutate(stmt, [(tirx.For, _on_for)])


def serialize_dynamic_parallel_levels(func: tirx.PrimFunc) -> tirx.PrimFunc:
    body = _serialize(func.body)
    return func if body.same_as(func.body) else func.with_body(body)


def SerializeDynamicParallelLevels():  # noqa: N802 - a pass constructor, named like TVM's
    return tl_pass("SerializeDynamicParallelLevels", serialize_dynamic_parallel_levels)
