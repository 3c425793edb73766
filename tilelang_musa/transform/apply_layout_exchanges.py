"""ApplyLayoutExchanges: rewrite the IR by the exchanges LayoutInference decided (layout_decisions.py).

A T.Parallel nest annotated with `tl.layout_exchanges` ([fragment, copy, shared tile, written]) is made to use each
copy instead of its fragment (LowerParallelLoop writes the copies between them around the nest); a reduction under
a `tl.reduce_exchange` AttrStmt ([scratch, tile, first thread, thread count]) reduces into the scratch fragment,
which is relaid out to the op's destination through the tile after it (and, for clear=False, the destination's old
values go to the scratch before it). The copies, scratches and tiles are declared at the top of the function body
(the reductions' first, then the nests', each in program order)."""

from __future__ import annotations

import dataclasses

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.attrs import LAYOUT_EXCHANGES, LAYOUTS_ATTR, REDUCE_EXCHANGE, TEMPORARY_ANNOTATION
from ..ir.utils import declare_buffers, replace_buffer, scope_of, thread_info
from ..tileop import parse_tile_op
from ..tileop.loop_plan import relayout
from .layout_decisions import EXCHANGE_SCOPE
from .partition_parallel_loop import thread_analyzer
from .pass_base import tl_pass


def _relaid_reduce(node: tirx.AttrStmt, layouts, threads, analyzer) -> tirx.Stmt:
    """The reduction into the scratch fragment, its result relaid out to the op's destination through the tile
    after it (and the destination's old values to the scratch before it, for clear=False)."""
    scratch, tile, first, count = node.node
    first, count = int(first), int(count)
    call = node.body.value
    op = parse_tile_op(call)
    region = dataclasses.replace(op.dst, buffer=scratch)
    reduce = tirx.Evaluate(tvm.ir.Call(call.op, [call.args[0], region.to_ir(), *list(call.args)[2:]],
                                       attrs=call.attrs, ret_ty="int32"))
    thread = threads.linear_thread_id()
    thread = thread - first if first else thread
    relay = [layouts, thread, count, analyzer]
    after = relayout(scratch, op.dst.buffer, tile, *relay)
    if op.clear:
        return tirx.SeqStmt([reduce, after])
    return tirx.SeqStmt([relayout(op.dst.buffer, scratch, tile, *relay), reduce, after])


def apply_layout_exchanges(func: tirx.PrimFunc) -> tirx.PrimFunc:
    if func.attrs is None or LAYOUTS_ATTR not in func.attrs:
        return func
    layouts = func.attrs[LAYOUTS_ATTR]
    threads = thread_info(func)
    analyzer = thread_analyzer(threads)
    reduce_buffers, nest_buffers = [], []

    def on_for(node, mutator):
        if LAYOUT_EXCHANGES not in node.annotations:
            return mutator.default_mutate(node)
        loop = node
        for buf, copy, tile, _ in node.annotations[LAYOUT_EXCHANGES]:
            loop = replace_buffer(loop, buf, copy)
            nest_buffers.extend((tile,) if copy.same_as(tile) else (copy, tile))
        return loop

    def on_attr(node, mutator):
        if node.attr_key != REDUCE_EXCHANGE:
            return mutator.default_mutate(node)
        reduce_buffers.extend(list(node.node)[:2])
        return _relaid_reduce(node, layouts, threads, analyzer)

    func = tvm_ffi.structural_mutate(func, [(tirx.For, on_for), (tirx.AttrStmt, on_attr)])
    declared = reduce_buffers + nest_buffers
    # the shared tiles hold a value from its store to its relaid read only (PlanDynamicSharedMemory may reuse them)
    annotations = [{TEMPORARY_ANNOTATION: True} if scope_of(b) == EXCHANGE_SCOPE else {} for b in declared]
    return func.with_body(declare_buffers(func.body, declared, annotations)) if declared else func


def ApplyLayoutExchanges():  # noqa: N802
    return tl_pass("ApplyLayoutExchanges", apply_layout_exchanges)
