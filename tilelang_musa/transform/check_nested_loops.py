"""CheckNestedLoops: upstream TileLang's semantic checks on what a T.Parallel loop may contain. Runs first, on the
program as written; it changes nothing.

A T.Parallel body is one iteration of a loop the compiler spreads over the block's threads, so it may hold
- another T.Parallel only as a perfect nest (`for i in T.Parallel(a): for j in T.Parallel(b): ...`, which is
  `T.Parallel(a, b)`); with other statements beside the inner loop, those would run once per outer iteration on
  threads the inner loop's mapping never decided;
- no T.Pipelined loop (its stages are block-wide copies and waits);
- no block-wide tile op (T.gemm, T.reduce_*, T.cumsum, T.finalize_reducer): each needs every thread of the block
  at once, not one iteration's share of them.
Each violation is a CompileError at the inner construct's line (the outer loop's when the inner has none).
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError, SourceLoc
from ..ir.attrs import PARALLEL, PIPELINE_STAGES
from ..ir.utils import loc_of
from .pass_base import tl_pass

STAGE = "tl.CheckNestedLoops"
PREFIX = "[TileLang Semantic Check] "
BLOCK_WIDE_OPS = {"tl.tileop.gemm": "T.gemm", "tl.tileop.reduce": "T.reduce", "tl.tileop.cumsum": "T.cumsum",
                  "tl.tileop.cummax": "T.cummax", "tl.tileop.finalize_reducer": "T.finalize_reducer"}


def _is_parallel(node: Any) -> bool:
    return isinstance(node, tirx.For) and node.annotations is not None and PARALLEL in node.annotations


def _is_pipelined(node: Any) -> bool:
    return isinstance(node, tirx.For) and node.annotations is not None and PIPELINE_STAGES in node.annotations


def _call_loc(call: Any) -> SourceLoc | None:
    if call.attrs is None or "tl.loc" not in call.attrs:
        return None
    filename, line, col = str(call.attrs["tl.loc"]).rsplit(":", 2)
    return SourceLoc(filename, int(line), int(col))


def _check_parallel_body(outer: tirx.For) -> None:
    where = loc_of(outer)

    def on_for(node: Any) -> None:
        if _is_pipelined(node):
            raise CompileError(PREFIX + f"a T.Pipelined loop (`{node.loop_var.name}`) inside the T.Parallel loop "
                               f"`{outer.loop_var.name}`: pipelined stages are block-wide; put the T.Parallel loop "
                               "inside the T.Pipelined one", loc_of(node) or where, STAGE)
        if _is_parallel(node):  # `outer` is the innermost level of its perfect nest: this one is not perfect
            raise CompileError(PREFIX + f"the T.Parallel loop `{node.loop_var.name}` is nested in the T.Parallel loop "
                               f"`{outer.loop_var.name}` beside other statements; only a perfect nest (the inner "
                               "loop alone in the outer body, i.e. T.Parallel(a, b)) is allowed",
                               loc_of(node) or where, STAGE)

    def on_call(node: Any) -> None:
        name = BLOCK_WIDE_OPS.get(str(node.op.name)) if isinstance(node.op, tvm.ir.Op) else None
        if name is not None:
            raise CompileError(PREFIX + f"{name} inside the T.Parallel loop `{outer.loop_var.name}`: a tile op runs on "
                               "the whole block at once, not per iteration of a parallel loop; call it outside the "
                               "loop", _call_loc(node) or where, STAGE)

    tvm_ffi.structural_walk(outer.body, [(tirx.For, on_for), (tvm.ir.Call, on_call)])


def check_nested_loops(func: tirx.PrimFunc) -> tirx.PrimFunc:
    outermost: list[tirx.For] = []

    def on_for(node: Any) -> bool | None:
        if _is_parallel(node):
            outermost.append(node)
            return tvm_ffi.WalkResult.SKIP  # its body is checked as a whole, with the nest it heads
        return None

    tvm_ffi.structural_walk(func.body, [(tirx.For, on_for)], order="pre")
    for loop in outermost:
        nest = loop
        while True:  # a perfect nest is one loop: check the body of its innermost level
            body = nest.body
            while isinstance(body, tirx.AttrStmt):
                body = body.body
            if not _is_parallel(body):
                break
            nest = body
        _check_parallel_body(nest)
    return func


def CheckNestedLoops():  # noqa: N802 - a pass constructor, named like TVM's
    return tl_pass("CheckNestedLoops", check_nested_loops)
