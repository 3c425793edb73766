"""LowerTileOp: replace `tl.tileop.*` calls by the statements their classes lower them to.

Runs twice: before LayoutInference for the ops that lower to T.Parallel nests or layout-free calls (copy,
fill, atomics, scans), and after it for the ops that need the chosen layouts (reductions, gemms).

Each op is lowered for the threads that reach it (the contiguous range the `if`s and T.ws regions around it allow,
thread_guard.py): its thread index counts from the first of them, its thread count is theirs."""

from __future__ import annotations

import dataclasses

from tvm import tirx

from ..ir.utils import thread_info
from ..tileop import LowerArgs, is_tile_op, parse_tile_op
from .gemm_groups import accumulator_groups
from .layout_inference import LAYOUTS_ATTR, annotated_buffers, unswizzled_tiles, view_buffers
from .partition_parallel_loop import thread_analyzer
from .pass_base import tl_pass
from .thread_guard import map_with_guards, reaching_threads


def lower_tile_op(func: tirx.PrimFunc, configs: dict, late: bool) -> tirx.PrimFunc:
    threads = thread_info(func)
    target = func.attrs["target"] if func.attrs is not None and "target" in func.attrs else None
    attrs = func.attrs if func.attrs is not None else {}
    layouts = dict(attrs[LAYOUTS_ATTR].items()) if late and LAYOUTS_ATTR in attrs else {}
    tid = threads.linear_thread_id()
    args = LowerArgs(target, tid, threads.num_threads, layouts, configs, annotated_buffers(func),
                     dict(threads.extents), view_buffers(func), 0, threads.num_threads,
                     unswizzled=unswizzled_tiles(func), accumulators=accumulator_groups(func))
    analyzer = thread_analyzer(threads)

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


def LowerTileOp(configs, late: bool = False):  # noqa: N802
    name = "LowerLayoutTileOp" if late else "LowerTileOp"
    return tl_pass(name, lambda func: lower_tile_op(func, configs, late))
