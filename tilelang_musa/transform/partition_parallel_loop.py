"""PartitionParallelLoop: distribute each remaining `T.Parallel` nest over the block's threads.

Nests that walk a fragment were already placed by LayoutInference (which follows the fragment's layout);
what remains touches only global, shared and per-thread memory and gets the free plan of loop_plan.py:
the fused iteration index f = ((slot // V) * num_threads + thread) * V + slot % V, so consecutive threads
take consecutive V-element pieces (coalesced global accesses, V-wide vector loads and stores). V is the
widest power of two (up to 16 bytes per access) for which every access of the body is contiguous in the
innermost loop variable, V-aligned, and inside one V-aligned piece of its buffer (so that a bounds guard
on a piece's first element is exact). Iterations that do not fill the threads evenly are guarded.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError
from ..language.loop import PARALLEL
from .ir_utils import ThreadInfo, as_int, loc_of, thread_info
from .loop_plan import free_plan, lower_with_plan, vector_width
from .pass_base import tl_pass
from .pass_config import PassConfigKey, enabled


def is_parallel(node: Any) -> bool:
    return isinstance(node, tirx.For) and node.annotations is not None and PARALLEL in node.annotations


def collect_nest(loop: tirx.For) -> tuple[list[tirx.For], Any]:
    nest = [loop]
    body = loop.body
    while is_parallel(body):
        nest.append(body)
        body = body.body
    return nest, body


def nest_extents(nest: list[tirx.For], stage: str) -> list[int]:
    extents = []
    for level in nest:
        extent = as_int(level.extent)
        if extent is None or as_int(level.min) != 0:
            raise CompileError(
                f"T.Parallel: loop `{level.loop_var.name}` has extent {level.extent}; T.Parallel extents must be "
                "compile-time constants", loc_of(nest[0]), stage)
        extents.append(extent)
    return extents


def thread_analyzer(threads: ThreadInfo):
    def make():
        ana = tvm.sym.Analyzer()
        for tag, var in threads.vars.items():
            ana.bind(var, tvm.ir.Range(0, threads.extents[tag]))
        return ana

    return make


def partition_parallel_loop(func: tirx.PrimFunc, disable_vectorize: bool = False) -> tirx.PrimFunc:
    threads = thread_info(func)
    analyzer = thread_analyzer(threads)

    def on_for(node, mutator):
        if not is_parallel(node):
            return mutator.default_mutate(node)
        nest, body = collect_nest(node)
        extents = nest_extents(nest, "PartitionParallelLoop")
        width = vector_width(extents, nest[-1].loop_var, body, analyzer, disable_vectorize)
        plan = free_plan(extents, threads.num_threads, width)
        return lower_with_plan([n.loop_var for n in nest], body, plan, threads.linear_thread_id(),
                               threads.num_threads, analyzer())

    return tvm_ffi.structural_mutate(func, [(tirx.For, on_for)])


def PartitionParallelLoop(configs):  # noqa: N802 - a pass constructor, named like TVM's
    disable = enabled(configs, PassConfigKey.TL_DISABLE_VECTORIZE)
    return tl_pass("PartitionParallelLoop", lambda func: partition_parallel_loop(func, disable))
