"""PartitionParallelLoop: distribute each remaining `T.Parallel` nest over the block's threads.

Nests that walk a fragment were already placed by LayoutInference and lowered by LowerParallelLoop (they follow the
fragment's layout).
A nest that writes only thread-private buffers (`T.alloc_local`, `T.alloc_var`) runs in full in every thread:
each thread fills its own copy, so splitting the iterations would leave the others' copies unwritten.
A nest under `if`s on the thread index is split among the threads that reach it (thread_guard.py).
What remains touches only global, shared and per-thread memory and gets the free plan of tileop/loop_plan.py:
the fused iteration index f = ((slot // V) * num_threads + thread) * V + slot % V, so consecutive threads
take consecutive V-element pieces (coalesced global accesses, V-wide vector loads and stores). V is the
widest power of two (up to 16 bytes per access) for which every access of the body is contiguous in the
innermost loop variable, V-aligned, and inside one V-aligned piece of its buffer (so that a bounds guard
on a piece's first element is exact). Iterations that do not fill the threads evenly are guarded.
A nest given `loop_layout=F` (the `parallel_loop_layout` annotation on its outer loop) runs by F instead
(planned_by_user: F checked against the nest, V at most F's contiguous width); so does a nest over fragments, in
LayoutInference.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from ..errors import CompileError
from ..ir.attrs import COALESCED_WIDTH, PARALLEL, PARALLEL_LOOP_LAYOUT
from ..ir.options import CompileOptions
from ..ir.utils import ThreadInfo, as_int, loc_of, substitute, thread_info, unflatten
from ..tileop.loop_plan import (
    LoopPlan, check_user_layout, contiguous_width, free_plan, lower_with_plan, user_plan, vector_width,
)
from ..tileop.parallel import writes_only_thread_private
from .pass_base import tl_pass
from .thread_guard import map_with_guards, reaching_threads


def is_parallel(node: Any) -> bool:
    return isinstance(node, tirx.For) and node.annotations is not None and PARALLEL in node.annotations


def collect_nest(loop: tirx.For) -> tuple[list[tirx.For], Any]:
    nest = [loop]
    body = loop.body
    while is_parallel(body):
        nest.append(body)
        body = body.body
    return nest, body


def nest_extents(nest: list[tirx.For], stage: str, fragments: tuple[str, ...] = ()) -> list[int]:
    """The nest's constant extents; a CompileError at its line otherwise (naming the `fragments` the nest indexes,
    whose layout is what needs the extents, as upstream's check names the fragment buffer)."""
    extents = []
    for level in nest:
        extent = as_int(level.extent)
        if extent is None or as_int(level.min) != 0:
            why = "T.Parallel extents must be compile-time constants"
            if fragments:
                why = (f"it indexes fragment buffer {', '.join(f'`{name}`' for name in fragments)}, whose layout places "
                       "each iteration on a thread, so its extents must be compile-time constants (a level whose "
                       "variable indexes no fragment may have a run-time extent)")
            raise CompileError(f"T.Parallel: loop `{level.loop_var.name}` has extent {level.extent}; {why}",
                               loc_of(nest[0]), stage)
        extents.append(extent)
    return extents


def thread_analyzer(threads: ThreadInfo):
    def make():
        ana = tvm.sym.Analyzer()
        for tag, var in threads.vars.items():
            ana.bind(var, tvm.ir.Range(0, threads.extents[tag]))
        return ana

    return make


def coalesced_width(loop: tirx.For) -> int | None:
    """The `coalesced_width=` of a T.Parallel (or of the T.copy it lowers): at most this many elements per access."""
    ann = loop.annotations
    return int(ann[COALESCED_WIDTH]) if ann is not None and COALESCED_WIDTH in ann else None


def user_layout(loop: tirx.For) -> Any:
    """The `loop_layout=` a T.Parallel nest was given (on its outer loop), or None."""
    ann = loop.annotations
    return ann[PARALLEL_LOOP_LAYOUT] if ann is not None and PARALLEL_LOOP_LAYOUT in ann else None


def planned_by_user(loop: tirx.For, extents: list[int], body: Any, inner_var: Any, reach: Any, block_threads: int,
                    analyzer, disable_vectorize: bool, stage: str) -> tuple[LoopPlan, int] | None:
    """The plan of a nest given `loop_layout=F`, and its vector width (None without one): F must map the nest's
    extents onto the threads that run it, each (iteration, replica) on its own (thread, slot); otherwise a
    CompileError at the loop's line."""
    fragment = user_layout(loop)
    if fragment is None:
        return None
    where = f"the block's {block_threads} threads" if reach.count == block_threads else \
        f"{reach} of the block, which its thread guards admit; loop_layout threads count from thread {reach.first}"
    problem = check_user_layout(fragment, extents, reach.count, where)
    if problem is not None:
        raise CompileError(f"T.Parallel: {problem}", loc_of(loop), stage)
    cap = contiguous_width(fragment, extents)
    user_cap = coalesced_width(loop)
    width = vector_width(extents, inner_var, body, analyzer, disable_vectorize,
                         cap if user_cap is None else min(cap, user_cap))
    return user_plan(fragment, extents, width, loc_of(loop), stage), width


def run_in_every_thread(nest: list[tirx.For], body: Any) -> tirx.For:
    for level in reversed(nest):
        body = tirx.For(level.loop_var, level.min, level.extent, tirx.ForKind.SERIAL, body)
    return body


def _strided_over_threads(nest: list[tirx.For], body: Any, thread: Any, count: int, span: Any = None) -> tirx.For:
    """A nest with extents known only at run time (`T.fill(x[a:b], 0)`, `T.Parallel(n)`): its iterations, in
    row-major order, are dealt to the threads round-robin, `count` at a time, each checked against the total."""
    extents = [level.extent for level in nest]
    total = extents[0]
    for extent in extents[1:]:
        total = total * extent
    step = tirx.Var("it", "int32")
    flat = step * count + thread
    positions = unflatten(flat, extents)
    body = substitute(body, {level.loop_var: level.min + pos for level, pos in zip(nest, positions)})
    return tirx.For(step, 0, tirx.floordiv(total + (count - 1), count), tirx.ForKind.SERIAL,
                    tirx.IfThenElse(flat < total, body, None, span), span=span)


def partition_parallel_loop(func: tirx.PrimFunc, disable_vectorize: bool = False) -> tirx.PrimFunc:
    threads = thread_info(func)
    analyzer = thread_analyzer(threads)

    def on_for(node, mutator, guards):
        if not is_parallel(node):
            return mutator.default_mutate(node)
        nest, body = collect_nest(node)
        if user_layout(node) is not None:
            reach = reaching_threads(guards, threads, analyzer(), node, "PartitionParallelLoop")
            extents = nest_extents(nest, "PartitionParallelLoop")
            plan, _ = planned_by_user(node, extents, body, nest[-1].loop_var, reach, threads.num_threads, analyzer,
                                      disable_vectorize, "PartitionParallelLoop")
            return lower_with_plan([n.loop_var for n in nest], mutator.default_mutate(body), plan,
                                   threads.linear_thread_id() - reach.first, reach.count, analyzer(), node.span)
        if writes_only_thread_private(body):
            return run_in_every_thread(nest, mutator.default_mutate(body))
        reach = reaching_threads(guards, threads, analyzer(), node, "PartitionParallelLoop")
        if any(as_int(level.extent) is None for level in nest):
            return _strided_over_threads(nest, mutator.default_mutate(body),
                                         threads.linear_thread_id() - reach.first, reach.count, node.span)
        extents = nest_extents(nest, "PartitionParallelLoop")
        width = vector_width(extents, nest[-1].loop_var, body, analyzer, disable_vectorize, coalesced_width(node))
        plan = free_plan(extents, reach.count, width)
        return lower_with_plan([n.loop_var for n in nest], body, plan, threads.linear_thread_id() - reach.first,
                               reach.count, analyzer(), node.span)

    return map_with_guards(func, threads, on_for)


def PartitionParallelLoop(configs):  # noqa: N802 - a pass constructor, named like TVM's
    disable = CompileOptions.of(configs).disable_vectorize
    return tl_pass("PartitionParallelLoop", lambda func: partition_parallel_loop(func, disable))
