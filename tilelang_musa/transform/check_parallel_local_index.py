"""CheckParallelLocalIndex: upstream TileLang's rule that a thread-private local buffer (T.alloc_local) is not indexed
by a T.Parallel loop variable. Runs first, on the program as written; it changes nothing.

A T.Parallel loop spreads its iterations over the block's threads, while each thread holds its own whole copy of
a local buffer: `local[i]` in `for i in T.Parallel(32)` would have thread t write only element t of its own copy,
and read elements no thread of its own ever wrote. An index that does not depend on the parallel variables (a
replicated `scale[0]`, an inner T.vectorized / T.serial lane) is fine. Each violation is a CompileError (a
ValueError, as upstream raises) at the parallel loop's line, naming the buffer and the variable.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError
from ..ir.attrs import PARALLEL
from ..ir.utils import loc_of
from .pass_base import tl_pass

STAGE = "tl.CheckParallelLocalIndex"
PREFIX = "[TileLang Semantic Check] "


def _is_local(buffer: Any) -> bool:
    return str(buffer.ty.storage_scope) == "local"


def _uses(index: Any, loop_vars: set) -> Any:
    found: list = []

    def on_var(var: Any) -> None:
        if var in loop_vars and not found:
            found.append(var)

    tvm_ffi.structural_walk(index, [(tvm.ir.expr.Var, on_var)])
    return found[0] if found else None


def _check_accesses(loop: tirx.For, loop_vars: set) -> None:
    def check(buffer: Any, indices: Any) -> None:
        if not _is_local(buffer):
            return
        for index in indices:
            var = _uses(index, loop_vars)
            if var is not None:
                raise CompileError(
                    PREFIX + f"Local buffer `{buffer.name}` is indexed by T.Parallel loop variable `{var.name}`. "
                    "Local buffers are thread-private and take no part in the parallel loop's layout: use "
                    "T.serial / T.vectorized / T.unroll for per-thread local indexing, or T.alloc_fragment when the "
                    "indexed dimension should be spread across the threads", loc_of(loop), STAGE)

    def on_load(load: Any) -> None:
        check(load.source, load.indices)

    def on_store(store: Any) -> None:
        check(store.buffer, store.indices)

    tvm_ffi.structural_walk(loop.body, [(tvm.ir.expr.TensorLoad, on_load), (tirx.BufferStore, on_store)])


def check_parallel_local_index(func: tirx.PrimFunc) -> tirx.PrimFunc:
    def on_for(node: Any) -> Any:
        if not (node.annotations is not None and PARALLEL in node.annotations):
            return None
        loop_vars, nest = set(), node
        while isinstance(nest, tirx.For) and nest.annotations is not None and PARALLEL in nest.annotations:
            loop_vars.add(nest.loop_var)  # a perfect nest (T.Parallel(a, b)): every level's variable
            body = nest.body
            while isinstance(body, tirx.AttrStmt):
                body = body.body
            nest = body
        _check_accesses(node, loop_vars)
        return tvm_ffi.WalkResult.SKIP

    tvm_ffi.structural_walk(func.body, [(tirx.For, on_for)], order="pre")
    return func


def CheckParallelLocalIndex():  # noqa: N802 - a pass constructor, named like TVM's
    return tl_pass("CheckParallelLocalIndex", check_parallel_local_index)
