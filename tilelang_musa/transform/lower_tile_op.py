"""LowerTileOp: replace `tl.tileop.*` calls by the statements their classes lower them to.

Runs twice: before LayoutInference for the ops that lower to T.Parallel nests or layout-free calls (copy,
fill, atomics, scans), and after it for the ops that need the chosen layouts (reductions, gemms)."""

from __future__ import annotations

import tvm_ffi
from tvm import tirx

from ..tileop import LowerArgs, is_tile_op, parse_tile_op
from .ir_utils import thread_info
from .layout_inference import LAYOUTS_ATTR, annotated_buffers, view_buffers
from .pass_base import tl_pass


def lower_tile_op(func: tirx.PrimFunc, configs: dict, late: bool) -> tirx.PrimFunc:
    threads = thread_info(func)
    target = func.attrs["target"] if func.attrs is not None and "target" in func.attrs else None
    attrs = func.attrs if func.attrs is not None else {}
    layouts = dict(attrs[LAYOUTS_ATTR].items()) if late and LAYOUTS_ATTR in attrs else {}
    args = LowerArgs(target, threads.linear_thread_id(), threads.num_threads, layouts, configs,
                     annotated_buffers(func), dict(threads.extents), view_buffers(func))

    def on_evaluate(node, mutator):
        if is_tile_op(node.value):
            op = parse_tile_op(node.value)
            if op.needs_layout == late:
                return op.lower(args)
        return node

    return tvm_ffi.structural_mutate(func, [(tirx.Evaluate, on_evaluate)])


def LowerTileOp(configs, late: bool = False):  # noqa: N802
    name = "LowerLayoutTileOp" if late else "LowerTileOp"
    return tl_pass(name, lambda func: lower_tile_op(func, configs, late))
