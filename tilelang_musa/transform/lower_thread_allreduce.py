"""LowerThreadAllreduce: TVMScript's raw cross-thread reduction, as upstream scripts write it,

    with T.attr(T.comm_reducer(lambda x, y: x + y, [T.Cast(dtype, 0)]), "reduce_scope", T.reinterpret(...)):
        T.evaluate(T.tvm_thread_allreduce(T.uint32(1), value, True, out[0], ty, tx, dtype="handle"))

combines `value` over the threads that differ only along the named thread axes (any subset of threadIdx.x/y/z)
and stores the result to `out` in each of them (the combiner must be a sum, max, min or bitwise and/or/xor of its
two arguments).

- Where the group is a strided run of the linear thread id (`tx + X * (ty + Y * tz)`) of a power-of-two length
  and stride, it becomes `tl::AllReduce<Op, Threads, Scale, warp>(value, red_buf)`, the template the tile
  reductions use: warp shuffles, and shared memory past 32 threads (there in 1-D blocks only: the template indexes
  its buffer by threadIdx.x).
- Any other group (extents that are not powers of two, x and z without y, spans past 32 threads in a 2-D/3-D
  block) meets in shared memory: every thread writes its value at its linear id, and every member combines its
  group's values in one fixed order, so all members get the same bits.

TVM's own lowering assumes CUDA's warp-synchronous shared-memory tree; MUSA's reduction template replaces it.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..errors import CompileError
from ..ir.attrs import TEMPORARY_ANNOTATION
from ..ir.utils import as_int, declare_buffers, scope_of, thread_info
from .pass_base import tl_pass

_COMBINERS = {tirx.Add: "tl::SumOp", tirx.Mul: "tl::ProdOp", tirx.Max: "tl::MaxOp", tirx.Min: "tl::MinOp", tirx.BitwiseAnd: "tl::BitAndOp",
              tirx.BitwiseOr: "tl::BitOrOp", tirx.BitwiseXor: "tl::BitXorOp"}
_AXES = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
_MAX_SHUFFLE_SPAN = 32  # reduce.h: offsets from 32 on go through shared memory, indexed by threadIdx.x
STAGE = "LowerThreadAllreduce"


def _functor(reducer) -> str:
    if len(reducer.result) != 1:
        raise CompileError("T.tvm_thread_allreduce: only single-value reducers are supported", stage=STAGE)
    result, lhs, rhs = reducer.result[0], reducer.lhs[0], reducer.rhs[0]
    functor = _COMBINERS.get(type(result))
    operands = {result.a.__chandle__(), result.b.__chandle__()} if functor else set()
    if functor is None or operands != {lhs.__chandle__(), rhs.__chandle__()}:
        raise CompileError(f"T.comm_reducer: the combiner `{result}` is not a sum, product, max, min or bitwise and/or/xor of "
                           "its two arguments", stage=STAGE)
    return functor


def _is_pow2(n: int) -> bool:
    return n > 0 and not n & (n - 1)


def _reduced_axes(reduce_vars, threads) -> list[int]:
    """Indices into _AXES of the thread axes named by the call (each a bound threadIdx var)."""
    axes = []
    for var in reduce_vars:
        axis = next((k for k, tag in enumerate(_AXES) if tag in threads.vars and var.same_as(threads.vars[tag])), None)
        if axis is None:
            raise CompileError(f"T.tvm_thread_allreduce: `{var}` is not a threadIdx axis of the kernel; a reduction "
                               "runs over threadIdx.x/y/z", stage=STAGE)
        if axis not in axes:
            axes.append(axis)
    return axes


def _template_group(axes: list[int], extents: list[int]) -> tuple[int, int] | None:
    """(Threads, Scale) of tl::AllReduce for the group along `axes`, or None if the template cannot run it."""
    lo, hi = min(axes), max(axes)
    if any(extents[k] != 1 for k in range(lo, hi + 1) if k not in axes):
        return None  # not one strided run of the linear id
    scale, count = 1, 1
    for k in range(lo):
        scale *= extents[k]
    for k in range(lo, hi + 1):
        count *= extents[k]
    if not (_is_pow2(scale) and _is_pow2(count)):
        return None
    if count * scale > _MAX_SHUFFLE_SPAN and any(e != 1 for e in extents[1:]):
        return None
    return count, scale


def _combine(reducer, a, b):
    result, lhs = reducer.result[0], reducer.lhs[0]
    return type(result)(a, b) if result.a.same_as(lhs) else type(result)(b, a)


def _shared_memory_reduce(reducer, value, out, axes, extents, coords, scratch) -> tirx.Stmt:
    """The group meets in shared memory: each thread stores its value at its linear id; after a barrier each
    member combines the group's values in the same order."""
    dtype = str(value.ty.dtype)
    red_buf = Tb.buffer((extents[0] * extents[1] * extents[2],), dtype, scope="shared.dyn")
    IRBuilder.name("red_buf", red_buf)
    acc = Tb.buffer((1,), dtype, scope="local")
    IRBuilder.name("red_acc", acc)
    scratch += [red_buf, acc]

    def linear(c):
        return c[0] + extents[0] * (c[1] + extents[1] * c[2])

    loop_vars = {k: tirx.Var(f"r{'xyz'[k]}", "int32") for k in axes}
    member = [loop_vars.get(k, coords[k]) for k in range(3)]
    body = tirx.BufferStore(acc, _combine(reducer, acc[0], red_buf[linear(member)]), [0])
    for k in sorted(axes):  # x innermost
        body = tirx.For(loop_vars[k], 0, extents[k], tirx.ForKind.SERIAL, body)
    barrier = tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))
    return tirx.SeqStmt([
        barrier,  # readers of an earlier reduction are done
        tirx.BufferStore(red_buf, value, [linear(coords)]),
        barrier,
        tirx.BufferStore(acc, reducer.identity_element[0], [0]),
        body,
        tirx.BufferStore(out.source, acc[0], list(out.indices)),
    ])


def lower_thread_allreduce(func: tirx.PrimFunc) -> tirx.PrimFunc:
    threads = thread_info(func)
    target = func.attrs["target"] if func.attrs is not None and "target" in func.attrs else None
    warp = int(target.attrs["thread_warp_size"]) if target is not None else 32
    scratch: list = []

    def extents_and_coords():
        extents, coords = [], []
        for tag in _AXES:
            extent = as_int(threads.extents.get(tag, 1))
            if extent is None:
                raise CompileError(f"T.tvm_thread_allreduce: {tag} needs a constant extent, got "
                                   f"{threads.extents[tag]}", stage=STAGE)
            extents.append(extent)
            coords.append(threads.vars[tag] if tag in threads.vars and extent > 1 else tirx.const(0, "int32"))
        return extents, coords

    def on_attr(node, mutator):
        if node.attr_key != "reduce_scope" or not isinstance(node.node, tirx.CommReducer):
            return mutator.default_mutate(node)
        reducer = node.node
        functor = _functor(reducer)

        def on_eval(stmt, inner):
            call = stmt.value
            if not (isinstance(call, tvm.ir.Call) and isinstance(call.op, tvm.ir.Op)
                    and str(call.op.name) == "tirx.tvm_thread_allreduce"):
                return stmt
            count = as_int(call.args[0])
            if count != 1:
                raise CompileError("T.tvm_thread_allreduce: only one value at a time is supported", stage=STAGE)
            value, cond, out, reduce_vars = call.args[1], call.args[2], call.args[3], list(call.args[4:])
            extents, coords = extents_and_coords()
            axes = [k for k in _reduced_axes(reduce_vars, threads) if extents[k] > 1]
            identity = reducer.identity_element[0]
            value = tirx.Select(cond, value, identity) if not (isinstance(cond, tirx.IntImm) and cond.value) else value
            if not axes:  # a group of one thread
                return tirx.BufferStore(out.source, value, list(out.indices))
            group = _template_group(axes, extents)
            if group is None:
                return _shared_memory_reduce(reducer, value, out, axes, extents, coords, scratch)
            count, scale = group
            red_buf = None
            if count * scale > _MAX_SHUFFLE_SPAN:
                red_buf = Tb.buffer((extents[0],), str(value.ty.dtype), scope="shared.dyn")
                IRBuilder.name("red_buf", red_buf)
                scratch.append(red_buf)
            buf_arg = tirx.address_of(red_buf[0]) if red_buf is not None else tirx.address_of(out)
            combined = tirx.call_extern(str(value.ty.dtype), f"tl::AllReduce<{functor}, {count}, {scale}, {warp}>",
                                        value, buf_arg)
            return tirx.BufferStore(out.source, combined, list(out.indices))

        return tvm_ffi.structural_mutate(node.body, [(tirx.Evaluate, on_eval)])

    body = tvm_ffi.structural_mutate(func.body, [(tirx.AttrStmt, on_attr)])
    if body.same_as(func.body):
        return func
    if scratch:
        # the shared scratch holds a group's values from their stores to their reads only
        body = declare_buffers(body, scratch, [{TEMPORARY_ANNOTATION: True} if scope_of(b) == "shared.dyn" else {}
                                               for b in scratch])
    return func.with_body(body)


def LowerThreadAllreduce():  # noqa: N802
    return tl_pass(STAGE, lower_thread_allreduce)
