"""LowerParallelLoop: each T.Parallel nest over fragments becomes a per-thread loop over slots, as LayoutInference
planned it.

LayoutInference leaves every nest that walks a fragment in place and records on its outer loop the plan it runs
by (`tileop/loop_plan.py`): `parallel_loop_layout`, the plan's Fragment (iteration -> (thread, slot)), and
`tl.loop_plan`, how to rebuild the plan:

    {"kind": "fragment", "fragment": F}            runs where F puts each iteration (a fragment's layout)
    {"kind": "region", "fragment": P, "whole": F, "shape": S, "origin": O, "positions": K}
                                                   runs on the slots of F (over S) whose element lies in the box
                                                   (O, K) the nest walks; P places the iterations
    {"kind": "user", "fragment": F, "width": V}    the nest's `loop_layout=F`, V-wide pieces
    {"kind": "free" | "row", "width": V}           the coalesced partition (or one that keeps rows on their own
                                                   threads), V-wide pieces

plus `"threads": [first, count]`, the range of threads that run it (a T.ws region). Each thread runs
`for slot in range(local_size): x = inverse(thread - first, slot); body(x)` (`lower_with_plan`), V slots at a time
where a fragment's plan gives a thread V consecutive innermost iterations and the body's global and shared accesses
are V-wide vectors there (TL_DISABLE_VECTORIZE: one at a time). A store of a fragment's plan to global memory whose
lanes each hold too few consecutive elements to fill sectors trades elements between lanes first and stores vectors
(tileop/lane_exchange.py), where every lane of the warp runs it.

A nest that reads a fragment in another layout than the fragment's (`tl.layout_exchanges`: [fragment, copy, tile,
written]) works on `copy`; the elements pass from the fragment to the copy through the shared `tile` before the
loop, and back after it when the loop writes them: each element is stored by the one thread (replica 0) that holds
it in the source layout, then loaded by every thread that holds it in the destination layout. The barrier passes
put the barriers between and around.

Runs right after LayoutInference: the late tile ops (LowerTileOp(late=True)) and LowerFragmentAccess expect the
loops over fragments to be per-thread loops over slots already.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from ..ir.attrs import LAYOUTS_ATTR, LAYOUT_EXCHANGES, LOOP_PLAN
from ..ir.options import CompileOptions
from ..errors import CompileError
from ..ir.utils import loc_of, thread_info
from ..layout import LayoutError
from ..target import warp_size
from ..tileop.lane_exchange import lower_with_lane_exchange, plan_lane_exchange
from ..tileop.loop_plan import (LoopPlan, contiguous_width, fragment_plan, free_plan, lower_with_plan, region_plan,
                                line_plan, relayout, row_plan, user_plan, vector_width)
from .layout_decisions import STAGE
from .partition_parallel_loop import coalesced_width, collect_nest, nest_extents, thread_analyzer
from .pass_base import tl_pass
from .uniform_conditions import warp_uniform_statements


def plan_of(recipe: Any, extents: list[int]) -> LoopPlan:
    """The LoopPlan a `tl.loop_plan` annotation records, for a nest of `extents`."""
    kind = str(recipe["kind"])
    if kind == "fragment":
        return fragment_plan(recipe["fragment"], extents)
    if kind == "user":
        return user_plan(recipe["fragment"], extents, int(recipe["width"]))
    count = int(recipe["threads"][1])
    if kind == "free":
        return free_plan(extents, count, int(recipe["width"]))
    if kind == "row":
        return row_plan(extents, count, int(recipe["width"]))
    if kind == "line":
        return line_plan(extents, count, int(recipe["width"]), int(recipe["line_dim"]))
    if kind == "region":
        shape = [int(e) for e in recipe["shape"]]
        positions = [None if int(k) < 0 else int(k) for k in recipe["positions"]]
        return region_plan(fragment_plan(recipe["whole"], shape), recipe["fragment"],
                           [int(o) for o in recipe["origin"]], positions, extents)
    raise ValueError(f"{LOOP_PLAN}: unknown plan kind {kind!r}")


def _vectorized(plan: LoopPlan, node: tirx.For, loop_vars: list, body, extents: list[int], analyzer) -> LoopPlan:
    """A fragment's plan with its slots taken V at a time where a thread holds V consecutive innermost iterations
    and every global and shared access of the body is a V-wide vector there (a row of W read beside a fragment)."""
    width = contiguous_width(plan.fragment, extents)
    if width > 1:
        width = min(width, vector_width(extents, loop_vars[-1], body, analyzer, False, coalesced_width(node)))
    return LoopPlan(plan.fragment, plan.local_size, width, plan.inverse) if width > 1 else plan


def lower_parallel_loop(func: tirx.PrimFunc, disable_vectorize: bool = False) -> tirx.PrimFunc:
    layouts = func.attrs[LAYOUTS_ATTR] if func.attrs is not None and LAYOUTS_ATTR in func.attrs else {}
    threads = thread_info(func)
    analyzer = thread_analyzer(threads)
    warp = warp_size(func.attrs["target"]) if func.attrs is not None and "target" in func.attrs else None
    planned = lambda node: isinstance(node, tirx.For) and node.annotations is not None and LOOP_PLAN in node.annotations
    warp_uniform = warp_uniform_statements(func, threads, planned) if warp is not None else set()

    def on_for(node, mutator):
        if not planned(node):
            return mutator.default_mutate(node)
        recipe = node.annotations[LOOP_PLAN]
        first, count = (int(x) for x in recipe["threads"])
        nest, body = collect_nest(node)
        extents = nest_extents(nest, STAGE)
        plan = plan_of(recipe, extents)
        thread = threads.linear_thread_id() - first if first else threads.linear_thread_id()
        loop_vars = [n.loop_var for n in nest]
        exchanges = node.annotations[LAYOUT_EXCHANGES] if LAYOUT_EXCHANGES in node.annotations else []
        exchange = None
        if str(recipe["kind"]) == "fragment" and not exchanges and not disable_vectorize \
                and node.__chandle__() in warp_uniform and first % warp == 0:
            exchange = plan_lane_exchange(loop_vars, body, plan, extents, count, warp, analyzer())
        if exchange is not None:
            lane = tirx.floormod(threads.linear_thread_id(), warp)
            return lower_with_lane_exchange(loop_vars, body, plan, exchange, thread, lane, analyzer())
        if str(recipe["kind"]) == "fragment" and not disable_vectorize:
            plan = _vectorized(plan, node, loop_vars, body, extents, analyzer)
        loop = lower_with_plan(loop_vars, body, plan, thread, count, analyzer(), node.span)
        if not exchanges:
            return loop
        before = [relayout(buf, copy, tile, layouts, thread, count, analyzer) for buf, copy, tile, _ in exchanges]
        after = [relayout(copy, buf, tile, layouts, thread, count, analyzer)
                 for buf, copy, tile, written in exchanges if int(written)]
        return tirx.SeqStmt(before + [loop] + after)

    def on_for_naming_the_loop(node, mutator):
        try:
            return on_for(node, mutator)
        except LayoutError as err:  # a fragment layout the loop cannot be split by (no padded inverse)
            raise CompileError(f"the parallel loop over `{node.loop_var.name}` (a T.Parallel nest, or a tile op "
                               "lowered to one): cannot split it among the threads by the layout of the fragment it "
                               f"walks: {err}", loc_of(node)) from None

    return tvm_ffi.structural_mutate(func, [(tirx.For, on_for_naming_the_loop)])


def LowerParallelLoop(configs):  # noqa: N802
    disable = CompileOptions.of(configs).disable_vectorize
    return tl_pass("LowerParallelLoop", lambda func: lower_parallel_loop(func, disable))
