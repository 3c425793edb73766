"""LowerThreadAllreduce: TVMScript's raw cross-thread reduction, as upstream scripts write it,

    with T.attr(T.comm_reducer(lambda x, y: x + y, [T.Cast(dtype, 0)]), "reduce_scope", T.reinterpret(...)):
        T.evaluate(T.tvm_thread_allreduce(T.uint32(1), value, True, out[0], tx, dtype="handle"))

becomes `out[0] = tl::AllReduce<tl::SumOp, X, 1, warp>(value, red_buf)` over the threads along threadIdx.x (the
combiner must be a sum, max, min or bitwise and/or/xor of its two arguments). TVM's own lowering of this assumes
CUDA's warp-synchronous shared-memory tree; MUSA's reduction template is the one the tile reductions use.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..errors import CompileError
from ..ir.utils import as_int, declare_buffers, thread_info
from .pass_base import tl_pass

_COMBINERS = {tirx.Add: "tl::SumOp", tirx.Max: "tl::MaxOp", tirx.Min: "tl::MinOp", tirx.BitwiseAnd: "tl::BitAndOp",
              tirx.BitwiseOr: "tl::BitOrOp", tirx.BitwiseXor: "tl::BitXorOp"}
STAGE = "LowerThreadAllreduce"


def _functor(reducer) -> str:
    if len(reducer.result) != 1:
        raise CompileError("T.tvm_thread_allreduce: only single-value reducers are supported", stage=STAGE)
    result, lhs, rhs = reducer.result[0], reducer.lhs[0], reducer.rhs[0]
    functor = _COMBINERS.get(type(result))
    operands = {result.a.__chandle__(), result.b.__chandle__()} if functor else set()
    if functor is None or operands != {lhs.__chandle__(), rhs.__chandle__()}:
        raise CompileError(f"T.comm_reducer: the combiner `{result}` is not a sum, max, min or bitwise and/or/xor of "
                           "its two arguments", stage=STAGE)
    return functor


def lower_thread_allreduce(func: tirx.PrimFunc) -> tirx.PrimFunc:
    threads = thread_info(func)
    target = func.attrs["target"] if func.attrs is not None and "target" in func.attrs else None
    warp = int(target.attrs["thread_warp_size"]) if target is not None else 32
    x_var, x_extent = threads.vars.get("threadIdx.x"), as_int(threads.extents.get("threadIdx.x", 1))
    scratch: list = []

    def on_attr(node, mutator):
        if node.attr_key != "reduce_scope" or not isinstance(node.node, tirx.CommReducer):
            return mutator.default_mutate(node)
        functor = _functor(node.node)

        def on_eval(stmt, inner):
            call = stmt.value
            if not (isinstance(call, tvm.ir.Call) and isinstance(call.op, tvm.ir.Op)
                    and str(call.op.name) == "tirx.tvm_thread_allreduce"):
                return stmt
            count = as_int(call.args[0])
            if count != 1:
                raise CompileError("T.tvm_thread_allreduce: only one value at a time is supported", stage=STAGE)
            value, cond, out, reduce_vars = call.args[1], call.args[2], call.args[3], list(call.args[4:])
            if len(reduce_vars) != 1 or x_var is None or not reduce_vars[0].same_as(x_var):
                raise CompileError("T.tvm_thread_allreduce: only a reduction over threadIdx.x is supported; got "
                                   f"{[str(v) for v in reduce_vars]}", stage=STAGE)
            if x_extent is None or x_extent & (x_extent - 1):
                raise CompileError(f"T.tvm_thread_allreduce: threadIdx.x's extent {x_extent} must be a power of two",
                                   stage=STAGE)
            other_axes = [t for t in ("threadIdx.y", "threadIdx.z") if as_int(threads.extents.get(t, 1)) != 1]
            red_buf = None
            if x_extent > 32:
                if other_axes:
                    raise CompileError("T.tvm_thread_allreduce: a reduction over more than 32 threads needs a 1-D "
                                       "block", stage=STAGE)
                red_buf = Tb.buffer((x_extent,), str(value.ty.dtype), scope="shared.dyn")
                IRBuilder.name("red_buf", red_buf)
                scratch.append(red_buf)
            identity = node.node.identity_element[0]
            value = tirx.Select(cond, value, identity) if not (isinstance(cond, tirx.IntImm) and cond.value) else value
            buf_arg = tirx.address_of(red_buf[0]) if red_buf is not None else tirx.address_of(out)
            combined = tirx.call_extern(str(value.ty.dtype), f"tl::AllReduce<{functor}, {x_extent}, 1, {warp}>", value,
                                        buf_arg)
            return tirx.BufferStore(out.source, combined, list(out.indices))

        body = tvm_ffi.structural_mutate(node.body, [(tirx.Evaluate, on_eval)])
        return body

    body = tvm_ffi.structural_mutate(func.body, [(tirx.AttrStmt, on_attr)])
    if body.same_as(func.body):
        return func
    if scratch:
        body = declare_buffers(body, scratch)
    return func.with_body(body)


def LowerThreadAllreduce():  # noqa: N802
    return tl_pass(STAGE, lower_thread_allreduce)
