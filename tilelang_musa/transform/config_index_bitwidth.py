"""ConfigIndexBitwidth (`tl.config_index_bitwidth = 64`): index arithmetic in int64, for tensors of 2^31 elements or
more, where an int32 offset such as `bz * 82944 * 128 + ...` would wrap. Without the key, a kernel with a tensor
past the int32 range is promoted the same way (upstream's index type promotion), unless
TL_DISABLE_INDEX_TYPE_PROMOTION is set or the key is 32: then it is a CompileError naming the tensor.

Runs before FlattenBuffer, so the flat offsets FlattenBuffer builds are formed in int64. The rule:
- every int loop variable and let-bound int variable becomes int64 (its bounds or value with it);
- inside a buffer index, an If / Select / if_then_else condition and a loop's bounds, every integer leaf is int64:
  constants are int64, other int variables (thread and block indices, scalar parameters, values loaded from int
  tensors) are cast to int64 before they take part, so no product is formed in 32 bits;
- everywhere else an operation that mixes widths is done in the wider one, and a value leaving for a place whose
  type is fixed (a call argument, a store to an int buffer) is cast back to the type it had.
Buffer shapes, thread extents and the kernel's parameters keep their types: the launch ABI does not change.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError
from ..ir.options import CompileOptions
from .pass_base import tl_pass

WIDE = "int64"
_ARITH = (tirx.Add, tirx.Sub, tirx.Mul, tirx.Div, tirx.Mod, tirx.FloorDiv, tirx.FloorMod, tirx.Min, tirx.Max,
          tirx.BitwiseAnd, tirx.BitwiseOr, tirx.BitwiseXor, tirx.LShift, tirx.RShift)
_COMPARE = (tirx.EQ, tirx.NE, tirx.LT, tirx.LE, tirx.GT, tirx.GE)


def index_bitwidth(options: CompileOptions) -> int | None:
    """The configured width, None when it is unset or 32 (the default: nothing to do)."""
    value = options.config_index_bitwidth
    if value is None:
        return None
    try:
        bits = int(value)
    except (TypeError, ValueError):
        bits = None
    if bits not in (32, 64):
        raise CompileError(f"pass config tl.config_index_bitwidth must be 32 or 64, got {value!r}")
    return None if bits == 32 else bits


def _narrow_int(dtype: Any) -> bool:
    t = tvm.runtime.DataType(str(dtype))
    return t.type_code == tvm.runtime.DataTypeCode.INT and t.bits < 64


def _wide(dtype: Any) -> str:
    lanes = tvm.runtime.DataType(str(dtype)).lanes
    return WIDE if lanes == 1 else f"{WIDE}x{lanes}"


def _is_int(expr: Any) -> bool:
    """An integer scalar or vector (not a buffer, a handle or a bool)."""
    return isinstance(getattr(expr, "ty", None), tvm.ir.PrimType) and \
        tvm.runtime.DataType(str(expr.ty.dtype)).type_code == tvm.runtime.DataTypeCode.INT


def _widen(expr: Any) -> Any:
    """`expr` as int64 (lanes kept): a constant is rebuilt, anything else cast."""
    if not _is_int(expr) or not _narrow_int(expr.ty.dtype):
        return expr
    if isinstance(expr, tirx.IntImm):
        return tirx.IntImm(WIDE, int(expr.value))
    return tirx.Cast(_wide(expr.ty.dtype), expr)


def _bits(expr: Any) -> int:
    return tvm.runtime.DataType(str(expr.ty.dtype)).bits


def _agree(a: Any, b: Any) -> tuple[Any, Any]:
    """Integer operands of one operation in the wider of their widths."""
    if _is_int(a) and _is_int(b) and _bits(a) != _bits(b):
        return (_widen(a), b) if _bits(a) < _bits(b) else (a, _widen(b))
    return a, b


def _restore(expr: Any, dtype: Any) -> Any:
    """`expr` back in `dtype` where it was widened (a place whose type is fixed)."""
    return expr if str(expr.ty.dtype) == str(dtype) else tirx.Cast(str(dtype), expr)


class _Widener:
    def __init__(self) -> None:
        self.remap: dict[Any, Any] = {}  # narrow int loop / let variable -> its int64 twin

    def _bind(self, var: Any) -> Any:
        if _narrow_int(var.ty.dtype) and var not in self.remap:
            self.remap[var] = tirx.Var(var.name, WIDE)
        return self.remap.get(var, var)

    # ---- an index: every integer leaf is int64 ------------------------------------------------------------------
    def index(self, expr: Any) -> Any:
        def on_var(node, mutator):
            return self.remap[node] if node in self.remap else _widen(node)

        def on_imm(node, mutator):
            return _widen(node)

        def on_load(node, mutator):  # a value read from an int tensor takes part widened; its own index is an index
            return _widen(self._load(node))

        def on_cast(node, mutator):
            value = mutator.mutate(node.value)
            dtype = node.ty.dtype
            return tirx.Cast(_wide(dtype) if _narrow_int(dtype) else str(dtype), value)

        callbacks = [(tvm.ir.Var, on_var), (tirx.IntImm, on_imm), (tvm.ir.TensorLoad, on_load), (tirx.Cast, on_cast),
                     *self._shared_callbacks()]
        return _widen(tvm_ffi.structural_mutate(expr, callbacks))

    # ---- everywhere -----------------------------------------------------------------------------------------------
    def _load(self, node: Any) -> Any:
        return tirx.BufferLoad(node.source, [self.index(i) for i in node.indices])

    def _shared_callbacks(self) -> list:
        def on_arith(node, mutator):
            a, b = _agree(mutator.mutate(node.a), mutator.mutate(node.b))
            return node if a.same_as(node.a) and b.same_as(node.b) else type(node)(a, b)

        def on_select(node, mutator):
            t, f = _agree(mutator.mutate(node.true_value), mutator.mutate(node.false_value))
            return tirx.Select(self.index(node.condition), t, f)

        def on_call(node, mutator):
            args = [mutator.mutate(a) for a in node.args]
            if isinstance(node.op, tvm.ir.Op) and str(node.op.name) == "prim.if_then_else":
                t, f = _agree(args[1], args[2])
                return tvm.ir.Call(node.op, [self.index(node.args[0]), t, f], ret_ty=t.ty)
            args = [_restore(new, old.ty.dtype) if _is_int(old) else new for new, old in zip(args, node.args)]
            if all(new.same_as(old) for new, old in zip(args, node.args)):
                return node
            return tvm.ir.Call(node.op, args, attrs=node.attrs, ty_args=node.ty_args, ret_ty=node.ty)

        def on_ramp(node, mutator):
            base, stride = _agree(mutator.mutate(node.base), mutator.mutate(node.stride))
            return tirx.Ramp(base, stride, node.lanes)

        def on_broadcast(node, mutator):
            return tirx.Broadcast(mutator.mutate(node.value), node.lanes)

        def on_let(node, mutator):
            value = self.index(node.value) if _narrow_int(node.var.ty.dtype) else mutator.mutate(node.value)
            return tirx.Let(self._bind(node.var), value, mutator.mutate(node.body))

        return [*((cls, on_arith) for cls in _ARITH), *((cls, on_arith) for cls in _COMPARE),
                (tirx.Select, on_select), (tvm.ir.Call, on_call), (tirx.Ramp, on_ramp), (tirx.Broadcast, on_broadcast),
                (tirx.Let, on_let)]

    def stmt(self, body: Any) -> Any:
        def on_var(node, mutator):
            return self.remap.get(node, node)

        def on_load(node, mutator):
            return self._load(node)

        def on_store(node, mutator):
            value = mutator.mutate(node.value)
            if _is_int(node.value):
                value = _restore(value, node.value.ty.dtype)
            return tirx.BufferStore(node.buffer, value, [self.index(i) for i in node.indices])

        def on_for(node, mutator):
            if not _narrow_int(node.loop_var.ty.dtype):
                return mutator.default_mutate(node)
            var = self._bind(node.loop_var)
            return tirx.For(var, self.index(node.min), self.index(node.extent), node.kind, mutator.mutate(node.body),
                            node.thread_binding, node.annotations)

        def on_bind(node, mutator):  # in scope for the rest of its SeqStmt, which is visited after it
            if not _is_int(node.var) or not _narrow_int(node.var.ty.dtype):
                return mutator.default_mutate(node)
            return tirx.Bind(self._bind(node.var), self.index(node.value))

        def on_if(node, mutator):
            else_case = mutator.mutate(node.else_case) if node.else_case is not None else None
            return tirx.IfThenElse(self.index(node.condition), mutator.mutate(node.then_case), else_case)

        return tvm_ffi.structural_mutate(body, [
            (tvm.ir.Var, on_var), (tvm.ir.TensorLoad, on_load), (tirx.BufferStore, on_store), (tirx.For, on_for),
            (tirx.Bind, on_bind), (tirx.IfThenElse, on_if), *self._shared_callbacks()])


def widen_indices(body: Any) -> Any:
    return _Widener().stmt(body)


def _buffer_past_int32(func: tirx.PrimFunc) -> tuple[str, int] | None:
    """A buffer of the kernel (a parameter or an allocation) with 2^31 elements or more: its name and size."""
    def size(buffer: Any) -> int:
        total = 1
        for extent in buffer.ty.shape:
            if not isinstance(extent, tirx.IntImm):
                return 0
            total *= int(extent.value)
        return total

    buffers = [p for p in func.params if isinstance(p.ty, tirx.BufferType)]
    tvm_ffi.structural_walk(func.body, [(cls, lambda node: buffers.append(node.buffer))
                                        for cls in (tirx.DeclBuffer, tirx.AllocBuffer)])
    return next(((b.name, size(b)) for b in buffers if size(b) >= 1 << 31), None)


def ConfigIndexBitwidth(configs: CompileOptions | dict):  # noqa: N802
    options = CompileOptions.of(configs)
    bits = index_bitwidth(options)
    # As upstream, a kernel with a tensor past the int32 range is promoted to int64 indices unless the user asked for
    # 32-bit indices or switched promotion off.
    asked_32 = options.config_index_bitwidth is not None and bits is None
    promote = not asked_32 and not options.disable_index_type_promotion

    def rewrite(func: tirx.PrimFunc) -> tirx.PrimFunc:
        if bits == 64:
            return func.with_body(widen_indices(func.body))
        large = _buffer_past_int32(func)
        if large is None:
            return func
        if promote:
            return func.with_body(widen_indices(func.body))
        why = "tl.config_index_bitwidth is 32" if asked_32 else "TL_DISABLE_INDEX_TYPE_PROMOTION is set"
        raise CompileError(f"buffer `{large[0]}` has {large[1]} elements, past the int32 range of this kernel's "
                           f"indices, and {why}: compile with pass_configs={{'tl.config_index_bitwidth': 64}}")

    return tl_pass("ConfigIndexBitwidth", rewrite)
