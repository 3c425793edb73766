"""FuseAsyncCopyLanes: `for v in T.vectorized(L): T.copy(src[..., b + v], dst[..., c + v], force_async_copy=True)`
(or `src_robust_desc=`) becomes one per-thread copy of the L-element run, so that the lanes form one piece: the
user's guide widens LDLMS pieces this way (8 float16 lanes: one 16-byte copy instead of eight 2-byte ones, which
LDLMS does not have). A loop whose copies are not contiguous in `v` in both operands stays as it is.

A `T.Parallel` nest whose body is one such element copy (`for i, d in T.Parallel(rows, cols):
T.async_copy(kv[idx[i], d], tile[i, d])`: rows gathered through an index tensor; the copy may follow bindings
that do not depend on the innermost loop, `r = idx[i]`) is cut the same way along its
innermost loop: it iterates over runs of the widest piece (16, 8 or 4 bytes; down to 1 for a synchronous robust
copy) whose every run is contiguous and aligned in both operands, so PartitionParallelLoop deals whole pieces to
the threads. The nest is one group of asynchronous copies: its pieces are issued without committing, then the
nest commits once (T.async_copy) or commits and waits for it (force_async_copy), where a lone element copy would
commit (and wait) after each element. Runs before LowerTileOp (tileop/async_copy.py lowers the fused copy)."""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.attrs import ASYNC_ATTR, PER_THREAD_ATTR
from ..ir.utils import as_int, dtype_bytes, flat_index, substitute
from ..tileop import Copy
from ..tileop.async_copy import (ASYNC_COMMIT, ASYNC_ISSUE, ASYNC_PIECE_BYTES, ASYNC_WAIT, ROBUST_PIECE_BYTES,
                                 commit_group, wait_group)
from ..tileop.region import Region
from .partition_parallel_loop import collect_nest, is_parallel
from .pass_base import tl_pass


def _lane_run(region: Region, lane, lanes: int) -> Region | None:
    """The run `region` covers over the lanes: its element at lane 0 and `lanes` elements along the last
    dimension, if the element moves by one along that dimension per lane and by nothing along the others."""
    zero = tirx.const(0, lane.ty.dtype)
    ana = tvm.sym.Analyzer()
    mins = []
    for d, index in enumerate(region.mins):
        at_zero = substitute(index, {lane: zero})
        step = ana.simplify(index - at_zero)
        moves = not (isinstance(step, tirx.IntImm) and int(step.value) == 0)
        if d < region.ndim - 1 and moves or d == region.ndim - 1 and not ana.can_prove_equal(step, lane):
            return None
        mins.append(at_zero)
    return Region(region.buffer, tuple(mins), tuple(tirx.const(1, "int32") for _ in mins[:-1]) +
                  (tirx.const(lanes, "int32"),))


def _element_copy(stmt) -> tvm.ir.Call | None:
    """The per-thread piecewise T.copy that `stmt` evaluates, or None."""
    call = stmt.value if isinstance(stmt, tirx.Evaluate) else None
    if (not isinstance(call, tvm.ir.Call) or not isinstance(call.op, tvm.ir.Op) or str(call.op.name) != Copy.op_name
            or call.attrs is None or PER_THREAD_ATTR not in call.attrs):
        return None
    return call


def _uses(expr, var) -> bool:
    found = []
    tvm_ffi.structural_walk(expr, [(tvm.ir.expr.Var, lambda v: found.append(v) if v.same_as(var) else None)])
    return bool(found)


def _aligned_run(region: Region, lane, lanes: int) -> Region | None:
    """`_lane_run`, if the run also starts at a provable multiple of `lanes` elements of its buffer."""
    run = _lane_run(region, lane, lanes)
    if run is None:
        return None
    ana = tvm.sym.Analyzer()
    run = Region(run.buffer, tuple(ana.simplify(m) for m in run.mins), run.extents)
    mod = ana.modular_set(flat_index(run.buffer, list(run.mins)))
    return run if mod.coeff % lanes == 0 and mod.base % lanes == 0 else None


def _fuse_parallel_nest(node: tirx.For):
    """A T.Parallel nest over one element copy, cut into a nest over pieces (module docstring); None if it is not
    one, or no piece wider than an element fits."""
    nest, body = collect_nest(node)
    inner = nest[-1]
    # The copy may follow bindings of values every lane shares (`r = idx[i]`, then the copy of row r)
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    binds, call = stmts[:-1], _element_copy(stmts[-1])
    if any(not isinstance(b, tirx.Bind) or _uses(b.value, inner.loop_var) for b in binds):
        return None
    extent = as_int(inner.extent)
    if call is None or extent is None or as_int(inner.min) != 0:
        return None
    mode = str(call.attrs[ASYNC_ATTR]) if ASYNC_ATTR in call.attrs else None
    if mode not in (ASYNC_WAIT, ASYNC_COMMIT, None) or (mode is None and len(call.args) < 3):
        return None  # a pipelined ("issue") copy is the pipeline's to group; without a mode, not piecewise
    src, dst = Region.from_ir(call.args[0]), Region.from_ir(call.args[1])
    elem = dtype_bytes(src.dtype)
    piece = tirx.Var(inner.loop_var.name, inner.loop_var.ty.dtype)
    lane = tirx.Var("lane", inner.loop_var.ty.dtype)
    for nbytes in ASYNC_PIECE_BYTES if mode is not None else ROBUST_PIECE_BYTES:
        lanes = nbytes // elem
        if nbytes % elem or lanes <= 1 or extent % lanes:
            continue
        at = {inner.loop_var: piece * lanes + lane}
        runs = [_aligned_run(Region(r.buffer, tuple(substitute(m, at) for m in r.mins), r.extents), lane, lanes)
                for r in (src, dst)]
        if None in runs:
            continue
        attrs = {str(k): call.attrs[k] for k in call.attrs.keys()}
        if mode is not None:
            attrs[ASYNC_ATTR] = ASYNC_ISSUE  # the nest commits (and waits) once, below
        stmt = tirx.Evaluate(tvm.ir.Call(call.op, [runs[0].to_ir(), runs[1].to_ir(), *list(call.args)[2:]],
                                         attrs=attrs, ret_ty="int32"))
        if binds:
            stmt = tirx.SeqStmt([*binds, stmt])
        for level in reversed(nest):
            var, level_extent = (piece, extent // lanes) if level is inner else (level.loop_var, level.extent)
            stmt = tirx.For(var, level.min, level_extent, level.kind, stmt, level.thread_binding, level.annotations,
                            span=level.span)
        tail = [] if mode is None else [commit_group()] + ([wait_group(0)] if mode == ASYNC_WAIT else [])
        return tirx.SeqStmt([stmt, *tail]) if tail else stmt
    return None


def fuse_async_copy_lanes(func: tirx.PrimFunc) -> tirx.PrimFunc:
    def on_for(node, mutator):
        if is_parallel(node):
            fused = _fuse_parallel_nest(node)
            if fused is not None:
                return fused
        node = mutator.default_mutate(node)
        lanes = as_int(node.extent)
        call = node.body.value if isinstance(node.body, tirx.Evaluate) else None
        if (node.kind != tirx.ForKind.VECTORIZED or lanes is None or as_int(node.min) != 0
                or not isinstance(call, tvm.ir.Call) or not isinstance(call.op, tvm.ir.Op)
                or str(call.op.name) != Copy.op_name or call.attrs is None or PER_THREAD_ATTR not in call.attrs):
            return node
        src = _lane_run(Region.from_ir(call.args[0]), node.loop_var, lanes)
        dst = _lane_run(Region.from_ir(call.args[1]), node.loop_var, lanes)
        if src is None or dst is None:
            return node
        attrs = {str(k): call.attrs[k] for k in call.attrs.keys()}
        return tirx.Evaluate(tvm.ir.Call(call.op, [src.to_ir(), dst.to_ir(), *list(call.args)[2:]], attrs=attrs,
                                         ret_ty="int32"))

    return tvm_ffi.structural_mutate(func, [(tirx.For, on_for)])


def FuseAsyncCopyLanes():  # noqa: N802 - a pass, named as TVM names passes
    return tl_pass("FuseAsyncCopyLanes", fuse_async_copy_lanes)
