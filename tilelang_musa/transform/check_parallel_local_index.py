"""CheckParallelLocalIndex: where a T.Parallel nest may index a thread-private local buffer (T.alloc_local) by its loop
variables. Runs first, on the program as written; it changes nothing.

Each thread holds its own whole copy of a local buffer, so:
- reading `local[i]` in `for i in T.Parallel(n)` is well defined: each thread reads its own copy at the iterations it
  runs (Moore Threads' copy_to_local test: `out[i] = quant_local[i // 64]`);
- writing `local[i]` is well defined where every thread runs every iteration. A nest that writes nothing but
  thread-private buffers, touches no fragment and calls nothing that writes memory runs in full in every thread
  (PartitionParallelLoop), so each thread fills its whole copy (`for i in T.Parallel(4): quant_local[i] = scales[i]`,
  as `T.copy(scales, quant_local)` does);
- a nest that writes `local[i]` but is split over the threads (it also writes shared or global memory, touches a
  fragment, has a loop_layout, or calls an atomic) would leave each thread's copy written only at its share of the
  iterations: a CompileError (a ValueError, as upstream raises) at the loop's line, naming the buffer, the variable
  and what splits the nest.

Upstream main's ParallelLocalIndexChecker rejects every such index, reads and local-only nests included; Moore
Threads' port runs them with the meaning above, which this follows (docs/UPSTREAM_SCRIPT_COMPAT.md, "Semantics").
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError
from ..ir.attrs import PARALLEL, PARALLEL_LOOP_LAYOUT
from ..ir.utils import collect_accesses, loc_of, may_write_memory, scope_of
from ..tileop.parallel import THREAD_PRIVATE_SCOPES
from .pass_base import tl_pass

STAGE = "tl.CheckParallelLocalIndex"
PREFIX = "[TileLang Semantic Check] "


def _first_var(index: Any, loop_vars: set) -> Any:
    found: list = []

    def on_var(var: Any) -> None:
        if var in loop_vars and not found:
            found.append(var)

    tvm_ffi.structural_walk(index, [(tvm.ir.expr.Var, on_var)])
    return found[0] if found else None


def _what_splits(loop: tirx.For, body: Any) -> str | None:
    """Why the threads would split this nest's iterations among themselves, in words; None when every thread runs
    all of them (the rule PartitionParallelLoop and LayoutInference follow)."""
    if loop.annotations is not None and PARALLEL_LOOP_LAYOUT in loop.annotations:
        return "is given a loop_layout"
    for access in collect_accesses(body):
        scope = scope_of(access.buffer)
        if scope == "local.fragment":
            verb = "writes" if access.is_store else "reads"
            return f"{verb} fragment `{access.buffer.name}`, whose elements are spread over the threads"
        if access.is_store and scope not in THREAD_PRIVATE_SCOPES:
            return f"writes {scope} buffer `{access.buffer.name}`"
    effects: list = []
    tvm_ffi.structural_walk(body, [(tvm.ir.Call, lambda c: effects.append(c) if may_write_memory(c) else None)])
    if effects:
        return f"calls `{_callee(effects[0])}`"
    return None


def _callee(call: Any) -> str:
    op = call.op
    if not isinstance(op, tvm.ir.Op):
        return str(op)
    if str(op.name) == "tirx.call_extern" and call.args and isinstance(call.args[0], tvm.ir.expr.StringImm):
        return str(call.args[0].value)  # T.atomic_add and the like, as written: the function they call
    return str(op.name)


def _check_nest(loop: tirx.For, body: Any, loop_vars: set) -> None:
    for access in collect_accesses(body):
        if not (access.is_store and scope_of(access.buffer) == "local"):
            continue  # a read of a local copy at a parallel index reads the thread's own copy
        var = next((v for v in map(lambda i: _first_var(i, loop_vars), access.indices) if v is not None), None)
        if var is None:
            continue
        reason = _what_splits(loop, body)
        if reason is None:
            return  # every thread runs the whole nest and fills its whole copy
        raise CompileError(
            PREFIX + f"Local buffer `{access.buffer.name}` is indexed by T.Parallel loop variable `{var.name}` in a "
            f"nest the threads split among themselves (it {reason}), so each thread would write only its share of "
            "its own copy. Fill the local buffer in a T.Parallel nest of its own (one that writes only local "
            "buffers runs in full in every thread) or with T.serial / T.copy, or use T.alloc_fragment when the "
            "indexed dimension should be spread across the threads", loc_of(loop), STAGE)


def check_parallel_local_index(func: tirx.PrimFunc) -> tirx.PrimFunc:
    def on_for(node: Any) -> Any:
        if not (node.annotations is not None and PARALLEL in node.annotations):
            return None
        loop_vars, nest, body = set(), node, node
        while isinstance(nest, tirx.For) and nest.annotations is not None and PARALLEL in nest.annotations:
            loop_vars.add(nest.loop_var)  # a perfect nest (T.Parallel(a, b)): every level's variable
            body = nest.body
            while isinstance(body, tirx.AttrStmt):
                body = body.body
            nest = body
        _check_nest(node, body, loop_vars)
        return tvm_ffi.WalkResult.SKIP

    tvm_ffi.structural_walk(func.body, [(tirx.For, on_for)], order="pre")
    return func


def CheckParallelLocalIndex():  # noqa: N802 - a pass constructor, named like TVM's
    return tl_pass("CheckParallelLocalIndex", check_parallel_local_index)
