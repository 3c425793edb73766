"""LowerTileOp: replace `tl.tileop.*` calls by the statements their classes lower them to.

Runs twice: before LayoutInference for the ops that lower to T.Parallel nests or layout-free calls (copy,
fill, atomics, scans), and after it for the ops that need the chosen layouts (reductions, gemms).

Each op is lowered for the threads that reach it (the contiguous range the `if`s and T.ws regions around it allow,
thread_guard.py): its thread index counts from the first of them, its thread count is theirs."""

from __future__ import annotations

import dataclasses

import tvm_ffi
from tvm import tirx

from ..ir.attrs import LAYOUTS_ATTR
from ..ir.large_bindings import large_bindings
from ..ir.options import CompileOptions
from ..ir.utils import thread_info
from ..tileop import LowerArgs, is_tile_op, parse_tile_op
from ..tileop.copy import Copy
from .gemm_groups import accumulator_groups
from .buffer_roles import annotated_buffers, unswizzled_tiles, view_buffers
from .partition_parallel_loop import thread_analyzer
from .pass_base import tl_pass
from .thread_guard import map_with_guards, reaching_threads


def lower_tile_op(func: tirx.PrimFunc, options: CompileOptions | dict, late: bool) -> tirx.PrimFunc:
    options = CompileOptions.of(options)
    threads = thread_info(func)
    target = func.attrs["target"] if func.attrs is not None and "target" in func.attrs else None
    attrs = func.attrs if func.attrs is not None else {}
    layouts = dict(attrs[LAYOUTS_ATTR].items()) if late and LAYOUTS_ATTR in attrs else {}
    tid = threads.linear_thread_id()
    args = LowerArgs(target, tid, threads.num_threads, layouts, options, annotated_buffers(func),
                     dict(threads.extents), view_buffers(func), 0, threads.num_threads,
                     unswizzled=unswizzled_tiles(func), accumulators=accumulator_groups(func),
                     bindings=large_bindings(func.body))
    analyzer = thread_analyzer(threads)
    if not late and options.disable_thread_storage_sync:
        func = barrier_relayout_round_trips(func)

    def on_evaluate(node, mutator, guards):
        if is_tile_op(node.value):
            op = parse_tile_op(node.value)
            if op.needs_layout == late:
                if op.thread_private:  # each thread runs all of it: the guards around it do not matter
                    return op.lower(args)
                reach = reaching_threads(guards, threads, analyzer() if guards else None, None, name, op.construct,
                                         op.loc)
                if reach.first == 0 and reach.count == threads.num_threads:
                    return op.lower(args)
                return op.lower(dataclasses.replace(args, thread_var=tid - reach.first, num_threads=reach.count,
                                                    first_thread=reach.first))
        return node

    name = "LowerLayoutTileOp" if late else "LowerTileOp"
    return map_with_guards(func, threads, lambda node, mutator, guards: mutator.default_mutate(node), on_evaluate)


def _fragment_copy(stmt) -> Copy | None:
    if isinstance(stmt, tirx.Evaluate) and is_tile_op(stmt.value):
        op = parse_tile_op(stmt.value)
        if isinstance(op, Copy) and op.async_mode is None and op.robust_desc is None:
            return op
    return None


def barrier_relayout_round_trips(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """`T.copy(frag_a, S); T.copy(S, frag_b)` re-lays a fragment out through the shared tile S. Which thread stores
    and which loads each element follows the layouts the compiler chooses for frag_a and frag_b (later, in layout
    inference): where they differ, elements cross threads and the loads must wait for the stores. The barrier
    passes see that, but TL_DISABLE_THREAD_STORAGE_SYNC turns them off, and a user who places barriers by hand
    cannot know our layouts (under another compiler's, the round trip may stay in each thread: Moore Threads'
    unified attention relies on it). So the compiler puts a barrier between the two copies itself, as it does for
    its own exchange tiles (tileop/loop_plan.relayout); where the layouts turn out equal it costs one barrier."""

    def crosses_threads(first: Copy, second: Copy) -> bool:
        return (first.src.scope == "local.fragment" and second.dst.scope == "local.fragment"
                and first.dst.scope in ("shared", "shared.dyn") and first.dst.buffer.same_as(second.src.buffer))

    def on_seq(node, mutator):
        node = mutator.default_mutate(node)
        stmts, changed = [], False
        for stmt in node.seq:
            prev = _fragment_copy(stmts[-1]) if stmts else None
            this = _fragment_copy(stmt)
            if prev is not None and this is not None and crosses_threads(prev, this):
                stmts.append(tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared")))
                changed = True
            stmts.append(stmt)
        return tirx.SeqStmt(stmts) if changed else node

    return tvm_ffi.structural_mutate(func, [(tirx.SeqStmt, on_seq)])


def LowerTileOp(configs, late: bool = False):  # noqa: N802
    name = "LowerLayoutTileOp" if late else "LowerTileOp"
    options = CompileOptions.of(configs)
    return tl_pass(name, lambda func: lower_tile_op(func, options, late))
