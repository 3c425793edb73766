"""LowerTileOp: replace every `tl.tileop.*` call by the statements its class lowers it to."""

from __future__ import annotations

import tvm_ffi
from tvm import tirx

from ..tileop import LowerArgs, is_tile_op, parse_tile_op
from .ir_utils import thread_info
from .pass_base import tl_pass


def lower_tile_op(func: tirx.PrimFunc, configs: dict, layouts: dict | None = None) -> tirx.PrimFunc:
    threads = thread_info(func)
    target = func.attrs["target"] if func.attrs is not None and "target" in func.attrs else None
    args = LowerArgs(target, threads.linear_thread_id(), threads.num_threads, layouts or {}, configs)

    def on_evaluate(node, mutator):
        if is_tile_op(node.value):
            return parse_tile_op(node.value).lower(args)
        return node

    return tvm_ffi.structural_mutate(func, [(tirx.Evaluate, on_evaluate)])


def LowerTileOp(configs):  # noqa: N802
    return tl_pass("LowerTileOp", lambda func: lower_tile_op(func, configs))
