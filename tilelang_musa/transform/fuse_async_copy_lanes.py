"""FuseAsyncCopyLanes: `for v in T.vectorized(L): T.copy(src[..., b + v], dst[..., c + v], force_async_copy=True)`
(or `src_robust_desc=`) becomes one per-thread copy of the L-element run, so that the lanes form one piece: the
user's guide widens LDLMS pieces this way (8 float16 lanes: one 16-byte copy instead of eight 2-byte ones, which
LDLMS does not have). A loop whose copies are not contiguous in `v` in both operands stays as it is. Runs before
LowerTileOp (tileop/async_copy.py lowers the fused copy)."""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.attrs import PER_THREAD_ATTR
from ..ir.utils import as_int, substitute
from ..tileop import Copy
from ..tileop.region import Region
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


def fuse_async_copy_lanes(func: tirx.PrimFunc) -> tirx.PrimFunc:
    def on_for(node, mutator):
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
