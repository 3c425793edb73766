"""SafeMemoryAccess: guard every global-memory access that may fall outside its tensor.

For each global access whose bounds the analyzer cannot prove from the loop ranges, the thread extents
and the enclosing conditions, a store is skipped (`if (in_bounds) A[i] = ...`) and a load reads zero
(`if_then_else(in_bounds, A[i], 0)`), or the tensor's `T.annotate_safe_value`; a predicated asynchronous copy
(T.ptx_cp_async(..., predicate=p)) gets the bounds in its predicate, so it still writes its zeros. This is what makes `N = 4097`
correct for a kernel written for multiples of the block size. Inside a vectorized loop a guard on the first lane is used when it is exact
(the access is contiguous in the lane, V-aligned, and the extent is a multiple of V), so the vector
access survives; otherwise the guard is per lane and the vectorizer falls back to scalar code.
A `T.assume(cond)` is a fact for the statements after it in its block: guards it implies are left out.
`TL_DISABLE_SAFE_MEMORY_ACCESS` turns the pass off except for T.copy loops (marked SAFE_COPY by the copy's
lowering), which stay predicated as upstream's copies are unless TL_DISABLE_SAFE_COPY_PREDICATION.
"""

from __future__ import annotations

import contextlib
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.attrs import NO_SAFE_ACCESS, SAFE_COPY, SAFE_VALUES_ATTR
from ..ir.large_bindings import is_large, learn
from ..ir.options import CompileOptions
from ..ir.utils import TensorLoad, as_int, scope_of, substitute
from .pass_base import tl_pass


class _Guarder:
    def __init__(self, safe_values: dict, copies_only: bool = False):
        self.active = not copies_only  # copies_only: guard the accesses inside SAFE_COPY regions only
        self.ana = tvm.sym.Analyzer()
        self.vector_loops: list[tuple[Any, int]] = []
        self.safe_values = safe_values  # tensor name -> what its out-of-bounds reads return (T.annotate_safe_value)

    # -- context
    def on_attr(self, node, mutator):
        if node.attr_key == NO_SAFE_ACCESS:  # TL_DISABLE_SAFE_COPY_PREDICATION: leave this copy unguarded
            return node.body
        if node.attr_key == SAFE_COPY:
            outer, self.active = self.active, True
            try:
                return mutator.mutate(node.body)
            finally:
                self.active = outer
        if node.attr_key == "thread_extent":
            self.ana.bind(node.node.var, tvm.ir.Range(0, node.value))
        return mutator.default_mutate(node)

    def on_for(self, node, mutator):
        self.ana.bind(node.loop_var, tvm.ir.Range.from_min_extent(node.min, node.extent))
        vectorized = node.kind == tirx.ForKind.VECTORIZED and as_int(node.extent) is not None
        if vectorized:
            self.vector_loops.append((node.loop_var, as_int(node.extent)))
        try:
            return mutator.default_mutate(node)
        finally:
            if vectorized:
                self.vector_loops.pop()

    def on_if(self, node, mutator):
        cond = mutator.mutate(node.condition)
        with self.ana.constraint_scope(cond):
            then_case = mutator.mutate(node.then_case)
        else_case = None
        if node.else_case is not None:
            with self.ana.constraint_scope(tirx.Not(cond)):
                else_case = mutator.mutate(node.else_case)
        return tirx.IfThenElse(cond, then_case, else_case)

    def on_seq(self, node, mutator):
        """`T.assume(cond)` holds for the statements after it in its block: guards it implies are dropped."""
        with contextlib.ExitStack() as scopes:
            stmts = []
            for stmt in node.seq:
                stmts.append(mutator.mutate(stmt))
                if (isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tvm.ir.Call)
                        and isinstance(stmt.value.op, tvm.ir.Op) and str(stmt.value.op.name) == "tirx.assume"):
                    # simplified first: the analyzer learns little from `min(j + 233, tid + 2) < M` as written,
                    # but `tid + 2 < M` bounds tid once the loop ranges have folded the min
                    scopes.enter_context(self.ana.constraint_scope(self.ana.simplify(stmt.value.args[0])))
        return tirx.SeqStmt(stmts)

    # -- guards
    def _conditions(self, buffer, indices) -> list[Any]:
        conds = []
        for index, extent in zip(indices, buffer.ty.shape):
            if isinstance(index, tvm.ir.Expr) and isinstance(index.ty, tvm.ir.PrimType) and index.ty.dtype.lanes > 1:
                return []  # already-vectorized index: handled by whoever built it
            index = self._first_lane(index, extent)
            if not self.ana.can_prove(index >= 0):
                conds.append(index >= 0)
            if not self.ana.can_prove(index < extent):
                conds.append(index < extent)
        return conds

    def _first_lane(self, index, extent):
        for var, width in self.vector_loops:
            at_zero = substitute(index, {var: tirx.const(0, "int32")})
            if at_zero.same_as(index):
                continue
            extent_value = as_int(extent)
            mod = self.ana.modular_set(self.ana.simplify(at_zero))
            if (extent_value is not None and extent_value % width == 0 and mod.coeff % width == 0
                    and mod.base % width == 0 and self.ana.can_prove_equal(index - at_zero, var)):
                index = at_zero
        return index

    def _address_conditions(self, node) -> list[Any]:
        """Bounds of the global elements whose address is taken (`&A[i]`, e.g. by an atomic)."""
        conds = []

        def on_call(call):
            if isinstance(call.op, tvm.ir.Op) and str(call.op.name) == "tirx.address_of":
                load = call.args[0]
                if isinstance(load, TensorLoad) and scope_of(load.source) == "global":
                    conds.extend(self._conditions(load.source, load.indices))

        tvm_ffi.structural_walk(node, [(tvm.ir.Call, on_call)])
        return conds

    def _guard_loads(self, value, known: list[Any]):
        def on_call(node, mutator):
            if isinstance(node.op, tvm.ir.Op) and str(node.op.name) == "tirx.address_of":
                return node  # guarded by the statement (see _address_conditions), never replaced by a value
            return mutator.default_mutate(node)

        def on_load(node, mutator):
            node = mutator.default_mutate(node)
            if scope_of(node.source) != "global":
                return node
            conds = [c for c in self._conditions(node.source, node.indices)
                     if not any(tvm_ffi.structural_equal(c, k) for k in known)]
            if not conds:
                return node
            otherwise = self.safe_values.get(node.source.name, tirx.const(0, node.ty.dtype))
            return tirx.if_then_else(_conjunction(conds), node, otherwise)

        return tvm_ffi.structural_mutate(value, [(tvm.ir.Call, on_call), (TensorLoad, on_load)])

    def on_store(self, node, mutator):
        if not self.active:
            return mutator.default_mutate(node)
        conds = self._conditions(node.buffer, node.indices) if scope_of(node.buffer) == "global" else []
        value = self._guard_loads(node.value, conds)
        store = tirx.BufferStore(node.buffer, value, list(node.indices))
        return tirx.IfThenElse(_conjunction(conds), store, None) if conds else store

    def on_evaluate(self, node, mutator):
        if not self.active:
            return mutator.default_mutate(node)
        conds = self._address_conditions(node.value)
        if conds and _is_predicated_copy(node.value):
            return tirx.Evaluate(_with_predicate(node.value, _conjunction(conds)))
        stmt = tirx.Evaluate(self._guard_loads(node.value, conds))
        return tirx.IfThenElse(_conjunction(conds), stmt, None) if conds else stmt

    def on_bind(self, node, mutator):
        if is_large(node.value):  # kept as a binding (ir/large_bindings.py): its range still bounds the accesses
            learn(self.ana, node.var, node.value)
        if not self.active:
            return mutator.default_mutate(node)
        return tirx.Bind(node.var, self._guard_loads(node.value, []))


def _is_predicated_copy(value: Any) -> bool:
    """`tl::cp_async_gs_conditional<B>(dst, src, pred)` (T.ptx_cp_async with predicate=): zeros where pred is false."""
    return (isinstance(value, tvm.ir.Call) and isinstance(value.op, tvm.ir.Op) and str(value.op.name) ==
            "tirx.call_extern" and len(value.args) == 4 and isinstance(value.args[0], tvm.ir.expr.StringImm)
            and str(value.args[0].value).startswith("tl::cp_async_gs_conditional<"))


def _with_predicate(copy: Any, in_bounds: Any) -> Any:
    """The predicated copy with its source's bounds joined to its predicate: out of bounds it writes its zeros, as
    when the predicate is false (skipping it would leave the destination unwritten), from no address outside."""
    def clamped(load, mutator):  # out of bounds the source address is element 0's: formed, never read
        if scope_of(load.source) != "global":
            return load
        zero = [tirx.const(0, index.ty.dtype) for index in load.indices]
        return load.source[[tirx.if_then_else(in_bounds, i, z) for i, z in zip(load.indices, zero)]]

    args = list(copy.args)
    args[2] = tvm_ffi.structural_mutate(args[2], [(TensorLoad, clamped)])
    args[3] = tirx.And(in_bounds, args[3])
    return tvm.ir.Call(copy.op, args, attrs=copy.attrs, ret_ty=copy.ty)


def _conjunction(conds: list[Any]) -> Any:
    out = conds[0]
    for c in conds[1:]:
        out = tirx.And(out, c)
    return out


def safe_memory_access(func: tirx.PrimFunc, copies_only: bool = False) -> tirx.PrimFunc:
    values = func.attrs[SAFE_VALUES_ATTR] if func.attrs is not None and SAFE_VALUES_ATTR in func.attrs else {}
    g = _Guarder({str(name): value for name, value in values.items()}, copies_only)
    return tvm_ffi.structural_mutate(func, [
        (tirx.AttrStmt, g.on_attr), (tirx.For, g.on_for), (tirx.IfThenElse, g.on_if),
        (tirx.BufferStore, g.on_store), (tirx.Evaluate, g.on_evaluate), (tirx.Bind, g.on_bind),
        (tirx.SeqStmt, g.on_seq),
    ])


def SafeMemoryAccess(configs):  # noqa: N802
    disabled = CompileOptions.of(configs).disable_safe_memory_access
    return tl_pass("SafeMemoryAccess", lambda func: safe_memory_access(func, copies_only=disabled))
