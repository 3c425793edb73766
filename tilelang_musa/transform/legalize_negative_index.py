"""LegalizeNegativeIndex: an element index that is negative for every value it can take counts from the end of its
dimension, as in Python (`A[-1]` is `A[n - 1]`, `A[-i - 1]` over i < 4 is `A[n - 1 - i]`; a broadcast of a negative
index, `A[T.Broadcast(-1, 4)]`, is the broadcast of `n - 1`).

Without this, a negative index would be out of bounds: its load would be guarded to zero and its store
skipped by SafeMemoryAccess, silently. A scalar index whose sign is not known (`A[shift + i]`) is left as it is; a vector index over loop and
thread indices that may cross zero (`A[T.Ramp(t - 2, 1, 4)]`) is wrapped lane by lane, as upstream does. (Upstream
wraps any vector index of unknown sign; one that reads a parameter or a loaded value stays a vector access here,
and a negative lane is an out-of-bounds access the simulator reports.)
Runs on the kernel as written, before tile ops are lowered (their regions are not element indices).
"""

from __future__ import annotations

import contextlib
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.utils import TensorLoad
from .pass_base import tl_pass


class _Legalizer:
    def __init__(self):
        self.ana = tvm.sym.Analyzer()
        self.ranged: set = set()  # loop and thread indices: their ranges are known
        self.conditions: list = []  # the `if` conditions around the node (vector indices only consult them)

    def on_for(self, node, mutator):
        self.ana.bind(node.loop_var, tvm.ir.Range.from_min_extent(node.min, node.extent))
        self.ranged.add(node.loop_var)
        return mutator.default_mutate(node)

    def on_attr(self, node, mutator):
        if node.attr_key == "thread_extent":
            self.ana.bind(node.node.var, tvm.ir.Range(0, node.value))
            self.ranged.add(node.node.var)
        return mutator.default_mutate(node)

    def on_if(self, node, mutator):
        cond = mutator.mutate(node.condition)
        self.conditions.append(cond)
        try:
            then_case = mutator.mutate(node.then_case)
        finally:
            self.conditions.pop()
        else_case = None
        if node.else_case is not None:
            self.conditions.append(tirx.Not(cond))
            try:
                else_case = mutator.mutate(node.else_case)
            finally:
                self.conditions.pop()
        return tirx.IfThenElse(cond, then_case, else_case)

    def only_ranged(self, expr) -> bool:
        """Whether `expr` reads nothing but loop and thread indices (no parameter, no loaded value)."""
        free = []
        tvm_ffi.structural_walk(expr, [(tvm.ir.expr.Var, lambda v: None if v in self.ranged else free.append(v))])
        return not free

    def indices(self, buffer, indices) -> list[Any] | None:
        out, changed = [], False
        for index, extent in zip(indices, buffer.ty.shape):
            if isinstance(index, tvm.ir.Expr) and index.ty.dtype.lanes == 1 and self.ana.can_prove(index < 0):
                index, changed = self.ana.simplify(index + extent), True
            elif isinstance(index, tirx.Ramp):
                legal = self.ramp(index, extent)
                if legal is not None:
                    index, changed = legal, True
            elif isinstance(index, tirx.Broadcast) and self.ana.can_prove(index.value < 0):  # every lane one index
                index, changed = tirx.Broadcast(self.ana.simplify(index.value + extent), index.lanes), True
            out.append(index)
        return out if changed else None

    def ramp(self, ramp, extent) -> Any | None:
        """A vector index `base + stride * lane`: lanes that are negative count from the end, each on its own
        (as upstream: a lane whose sign is known only at run time picks `lane + extent` when it is negative), so a
        ramp that straddles zero becomes a gather of the wrapped lanes."""
        with contextlib.ExitStack() as scopes:  # `if i >= 1: A[i - 1:i + 3]` is known non-negative there
            for cond in self.conditions:
                scopes.enter_context(self.ana.constraint_scope(cond))
            return self._ramp(ramp, extent)

    def _ramp(self, ramp, extent) -> Any | None:
        lanes = int(ramp.lanes)
        each = [self.ana.simplify(ramp.base + ramp.stride * tirx.const(k, ramp.stride.ty.dtype))
                for k in range(lanes)]
        if all(self.ana.can_prove(lane >= 0) for lane in each):
            return None
        if all(self.ana.can_prove(lane < 0) for lane in each):
            return tirx.Ramp(self.ana.simplify(ramp.base + extent), ramp.stride, ramp.lanes)
        if not self.only_ranged(ramp):  # a sign only the data decides (`A[idx * 8:idx * 8 + 8]`): left as written
            return None
        wide = str(extent.ty.dtype) if isinstance(extent, tvm.ir.Expr) else None
        if wide is not None and tvm.DataType(wide).bits > tvm.DataType(str(each[0].ty.dtype)).bits:
            each = [self.ana.simplify(tirx.Cast(wide, lane)) for lane in each]  # lanes as wide as the dimension
        wrapped = []
        for lane in each:
            if self.ana.can_prove(lane < 0):
                lane = self.ana.simplify(lane + extent)
            elif not self.ana.can_prove(lane >= 0):
                lane = tirx.Select(lane < 0, self.ana.simplify(lane + extent), lane)
            wrapped.append(lane)
        return tirx.Shuffle(wrapped, [tirx.const(k, "int32") for k in range(lanes)])

    def on_load(self, node, mutator):
        node = mutator.default_mutate(node)
        indices = self.indices(node.source, node.indices)
        return node if indices is None else node.source[tuple(indices)]

    def on_store(self, node, mutator):
        node = mutator.default_mutate(node)
        indices = self.indices(node.buffer, node.indices)
        return node if indices is None else tirx.BufferStore(node.buffer, node.value, indices)


def legalize_negative_index(func: tirx.PrimFunc) -> tirx.PrimFunc:
    legalizer = _Legalizer()
    return tvm_ffi.structural_mutate(func, [(tirx.For, legalizer.on_for), (tirx.AttrStmt, legalizer.on_attr),
                                            (tirx.IfThenElse, legalizer.on_if),
                                            (TensorLoad, legalizer.on_load), (tirx.BufferStore, legalizer.on_store)])


def LegalizeNegativeIndex():  # noqa: N802 - a pass constructor, named like TVM's
    return tl_pass("LegalizeNegativeIndex", legalize_negative_index)
