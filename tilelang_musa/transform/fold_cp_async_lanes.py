"""FoldCpAsyncLanes: `for v in T.vectorized(L): T.ptx_cp_async(T.access_ptr(S[b + v], "w", 1),
T.access_ptr(A[c + v], "r", 1), 1)` becomes one copy of the L-element run from `&S[b]` and `&A[c]`, as upstream's
and Moore Threads' vectorizer fold it: L float16 lanes of one element are one 8-byte LDLMS copy, 32 int4 lanes one
16-byte copy (bytes from the logical element count, in bits). A lane of n elements folds when every operand's
element moves by n (its flat index in its tensor) per lane, the predicate (if any) is the same in every lane, and the
run starts at a multiple of its length (an LDLMS copy is naturally aligned).

A run whose start the analyzer cannot place (a row loaded from memory) folds as upstream's does; a lane that already
is a 4, 8 or 16-byte copy is left alone unless the fold is provably aligned. Any copy of another size
left after folding is a CompileError at its line: it was not in a T.vectorized loop, its lanes were not contiguous,
or they add up to a size an LDLMS copy does not move. Runs before LowerTileOp, so that LowerSharedLayout checks the
folded copy against the tile's layout (tileop/ptx_cp_async.py)."""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError
from ..ir.utils import as_int, flat_index, substitute
from ..tileop.access_ptr import access_ptr as access_ptr_of
from ..tileop.access_ptr import as_access
from ..tileop.ptx_cp_async import copy_bytes_of, copy_loc, cp_async_elems, cp_async_ptr_call
from .pass_base import tl_pass


def _uses(expr: Any, var: Any) -> bool:
    found = []
    tvm_ffi.structural_walk(expr, [(tirx.Var, lambda v: found.append(v) if v.same_as(var) else None)])
    return bool(found)


def _lane_copy(stmt: Any) -> Any:
    """The T.ptx_cp_async call `stmt` evaluates, or None."""
    call = stmt.value if isinstance(stmt, tirx.Evaluate) else None
    return call if cp_async_elems(call) is not None else None


def _dtype(call: Any) -> str:
    return str(as_access(call.args[1]).element.source.ty.dtype.dtype)


def _run_start(access_ptr: Any, lane: Any, start: Any, lanes: int, elems: int) -> tuple[Any, bool | None] | None:
    """(the marker of the run's first element, whether the run starts at a multiple of its length: True or False
    where the analyzer proves it, None where it cannot tell) if the access moves by `elems` elements per lane, else
    None."""
    access = as_access(access_ptr)
    element = access.element
    ana = tvm.sym.Analyzer()
    ana.bind(lane, tvm.ir.Range.from_min_extent(start, tirx.const(lanes, lane.ty.dtype)))
    flat = flat_index(element.source, list(element.indices))
    first = substitute(flat, {lane: start})
    if not ana.can_prove_equal(flat - first, (lane - start) * elems):
        return None
    mod = ana.modular_set(ana.simplify(first))
    run = elems * lanes
    aligned = mod.base % run == 0 if mod.coeff % run == 0 else None
    first_element = element.source[tuple(ana.simplify(substitute(i, {lane: start})) for i in element.indices)]
    return access_ptr_of(first_element, access.rw), aligned


def _fold(call: Any, loop: tirx.For, lanes: int) -> Any:
    """The one copy of the loop's lanes of `call`, or None to leave the lanes as they are (raises where they can
    be neither)."""
    elems, dtype = cp_async_elems(call), _dtype(call)
    lane_ok = copy_bytes_of(elems, dtype) is not None
    predicate = call.args[3] if len(call.args) > 3 else None
    runs = [_run_start(call.args[k], loop.loop_var, loop.min, lanes, elems) for k in (1, 2)]
    why = None
    if predicate is not None and _uses(predicate, loop.loop_var):
        why = f"its predicate depends on the lane `{loop.loop_var.name}`"
    elif None in runs:
        why = (f"the lanes' elements are not {elems} apart in both tensors (each lane's copy must start where the "
               f"last one ended along `{loop.loop_var.name}`)")
    elif copy_bytes_of(elems * lanes, dtype) is None:
        why = f"{lanes} lanes of {elems} make {elems * lanes} elements of {dtype}, not 4, 8 or 16 bytes"
    elif any(aligned is False for _, aligned in runs) or lane_ok and any(aligned is None for _, aligned in runs):
        why = f"the run of {elems * lanes} elements does not provably start at a multiple of its length"
    if why is None:
        return cp_async_ptr_call(runs[0][0], runs[1][0], elems * lanes, predicate, copy_loc(call))
    if lane_ok:
        return None
    raise _refusal(call, f"in T.vectorized({lanes}) over `{loop.loop_var.name}`, its lanes do not fold into one "
                         f"copy: {why}")


def _refusal(call: Any, why: str) -> CompileError:
    return CompileError(f"T.ptx_cp_async: {cp_async_elems(call)} elements of {_dtype(call)}: an LDLMS copy moves 4, "
                        f"8 or 16 bytes; {why}", copy_loc(call), stage="FoldCpAsyncLanes")


def _fold_loop(loop: tirx.For) -> Any:
    """The loop with its lanes folded, or None when it is not a T.vectorized loop of T.ptx_cp_async copies."""
    lanes = as_int(loop.extent)
    stmts = list(loop.body.seq) if isinstance(loop.body, tirx.SeqStmt) else [loop.body]
    calls = [_lane_copy(stmt) for stmt in stmts]
    if loop.kind != tirx.ForKind.VECTORIZED or lanes is None or None in calls:
        return None
    folded = [_fold(call, loop, lanes) for call in calls]
    if None in folded:
        return None
    stmts = [tirx.Evaluate(call) for call in folded]
    return stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)


def fold_cp_async_lanes(func: tirx.PrimFunc) -> tirx.PrimFunc:
    def on_for(node: tirx.For, mutator: Any) -> Any:
        node = mutator.default_mutate(node)  # inner lanes first: nested T.vectorized loops fold level by level
        folded = _fold_loop(node) if isinstance(node, tirx.For) else None
        return folded if folded is not None else node

    func = tvm_ffi.structural_mutate(func, [(tirx.For, on_for)])

    def refuse_unfolded(call: Any) -> None:
        elems = cp_async_elems(call)
        if elems is not None and copy_bytes_of(elems, _dtype(call)) is None:
            raise _refusal(call, "fewer elements fold into one copy only as the lanes of a T.vectorized loop, each "
                                 "lane's copy starting where the last one ended")

    tvm_ffi.structural_walk(func.body, [(tvm.ir.Call, refuse_unfolded)])
    return func


def FoldCpAsyncLanes():  # noqa: N802 - a pass, named as TVM names passes
    return tl_pass("FoldCpAsyncLanes", fold_cp_async_lanes)
