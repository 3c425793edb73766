"""RemoveEmptyTiles: an on-chip buffer with no elements (a 0 in its shape) and the work on it are taken out.

A kernel written for a tail of some width keeps its code when the width is 0 (SGLang's decode attention over a
KV cache without a rope tail: `Q_tail = T.alloc_shared([H, D_tail])`, `T.copy(Q[..., D:], Q_tail)`,
`T.gemm(Q_tail, K_tail, acc_s, transpose_B=True)`, `for i, d in T.Parallel(BI, D_tail)` with `D_tail = 0`).
Each of those does nothing: a copy or fill of no elements, a loop of no iterations, and a gemm over an empty
K adds nothing to its accumulator (or, with `clear_accum=True`, zeroes it: a fill). They are removed here, first
of all passes, with the empty allocations; a use left over (an op over the empty buffer that does something, a
load of an element it does not have) is an error naming the buffer.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError
from ..ir.utils import loc_of
from ..tileop import is_tile_op
from ..tileop.base import call_loc
from ..tileop.fill import Fill
from ..tileop.gemm import Gemm
from ..tileop.copy import Copy
from ..tileop.region import TensorRegion
from .pass_base import tl_pass

_NO_OP = tirx.Evaluate(tirx.const(0, "int32"))
_GEMM_C = 2  # T.gemm(A, B, C, ...): the accumulator's argument


def _is_zero(extent: Any) -> bool:
    return isinstance(extent, tirx.IntImm) and extent.value == 0


def _is_no_op(stmt: Any) -> bool:
    return isinstance(stmt, tirx.Evaluate) and _is_zero(stmt.value)


def _empty_buffers(func: tirx.PrimFunc) -> set:
    found: set = set()

    def on_alloc(alloc: tirx.AllocBuffer) -> None:
        if any(_is_zero(e) for e in alloc.buffer.ty.shape):
            found.add(alloc.buffer)

    tvm_ffi.structural_walk(func.body, [(tirx.AllocBuffer, on_alloc)], order="pre")
    return found


def _is_empty(region: Any, empty: set) -> bool:
    return region.source in empty or any(_is_zero(r.extent) for r in region.region)


def _without_empty_op(call: tvm.ir.Call, empty: set) -> Any:
    """The statement for a tile op over an empty region: nothing, or the fill a clearing gemm amounts to."""
    name = str(call.op.name)
    regions = [a for a in call.args if isinstance(a, TensorRegion)]
    if not any(_is_empty(r, empty) for r in regions):
        return None
    if name in (Copy.op_name, Fill.op_name):
        return _NO_OP
    if name == Gemm.op_name:
        accumulator = call.args[_GEMM_C]
        clears = call.attrs is not None and "clear_accum" in call.attrs and bool(call.attrs["clear_accum"])
        if not clears or _is_empty(accumulator, empty):
            return _NO_OP
        zero = tirx.const(0, str(accumulator.source.ty.dtype.dtype))
        attrs = {"tl.loc": call.attrs["tl.loc"]} if "tl.loc" in call.attrs else {}
        return tirx.Evaluate(tvm.ir.Call(tvm.ir.Op.get(Fill.op_name), [accumulator, zero], attrs=attrs,
                                         ret_ty="int32"))
    names = ", ".join(f"`{r.source.name}`" for r in regions if _is_empty(r, empty))
    raise CompileError(f"{name.rsplit('.', 1)[-1]} over {names}, which has no elements (a 0 in its shape or "
                       "region): only T.copy, T.fill and T.gemm may run over an empty tile (they then do nothing)",
                       call_loc(call))


def remove_empty_tiles(func: tirx.PrimFunc) -> tirx.PrimFunc:
    empty = _empty_buffers(func)

    def on_evaluate(node, mutator):
        if is_tile_op(node.value):
            replaced = _without_empty_op(node.value, empty)
            if replaced is not None:
                return replaced
        return node

    def on_for(node, mutator):
        node = mutator.default_mutate(node)
        if _is_zero(node.extent) or _is_no_op(node.body):
            return _NO_OP
        return node

    def on_alloc(node, mutator):
        return _NO_OP if node.buffer in empty else node

    def on_seq(node, mutator):  # the removed statements leave no trace
        node = mutator.default_mutate(node)
        if not isinstance(node, tirx.SeqStmt):
            return node
        kept = [s for s in node.seq if not _is_no_op(s)]
        return _NO_OP if not kept else kept[0] if len(kept) == 1 else tirx.SeqStmt(kept)

    if not empty and not _has_empty_loop(func):
        return func
    body = tvm_ffi.structural_mutate(func.body, [(tirx.Evaluate, on_evaluate), (tirx.For, on_for),
                                                 (tirx.AllocBuffer, on_alloc), (tirx.SeqStmt, on_seq)])
    _check_no_use(body, empty)
    return func.with_body(body)


def _has_empty_loop(func: tirx.PrimFunc) -> bool:
    found = []
    tvm_ffi.structural_walk(func.body, [(tirx.For, lambda f: found.append(f) if _is_zero(f.extent) else None)],
                            order="pre")
    return bool(found)


def _check_no_use(body: Any, empty: set) -> None:
    """No access to an empty buffer is left (its ops and loops are gone); an error at the innermost loop's line."""
    where: list = [None]

    def on_for(node, mutator):
        outer = where[0]
        where[0] = loc_of(node) or outer
        mutator.default_mutate(node)
        where[0] = outer
        return node

    def on_stmt(node, mutator):
        mentioned: list = []
        tvm_ffi.structural_walk(node, [(tvm.ir.expr.Var, lambda v: mentioned.append(v) if v in empty else None)],
                                order="pre")
        if mentioned:
            buffer = mentioned[0]
            raise CompileError(f"`{buffer.name}` has no elements (shape {list(buffer.ty.shape)}) but is accessed "
                               "here; only T.copy, T.fill, T.gemm and T.Parallel loops of no iterations may name an "
                               "empty tile", loc_of(node) or where[0])
        return node

    if empty:
        tvm_ffi.structural_mutate(body, [(tirx.For, on_for), (tirx.BufferStore, on_stmt), (tirx.Evaluate, on_stmt)])


def RemoveEmptyTiles():  # noqa: N802 - a pass, named as TVM names passes
    return tl_pass("RemoveEmptyTiles", remove_empty_tiles)
