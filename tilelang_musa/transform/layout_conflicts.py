"""LayoutInference's checks once every layout is chosen: stores that would leave a replicated fragment's copies
disagreeing are refused, and where a nest (or a reduction) would touch an element its thread does not hold, the
exchange through shared memory that reconciles the two layouts is decided (applied by ApplyLayoutExchanges). A part
of _Inference (layout_inference.py)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import tvm
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..diagnostics import warn_once
from ..errors import CompileError
from ..ir.utils import as_int, collect_accesses, scope_of
from ..layout import Fragment, reduce_fragment
from ..layout._expr import evaluate
from ..tileop.loop_plan import free_plan
from ..tileop.reduce import Reduce
from .layout_access import access_guards, invariant_terms, uses_var
from .layout_decisions import EXCHANGE_SCOPE, FRAGMENT_SCOPE, STAGE, Exchange, NestDecision, ReduceExchange


class Conflicts:
    """`check()`: the default placement of what nothing placed, then the conflicts, each refused or exchanged."""

    def _check_replicated_writes(self, nest: NestDecision) -> None:
        """A store to a replicated fragment from a nest some of whose variables its index does not use (`out[t, k] =
        x[t, e]` under `if e == best[t]`, in a nest over (t, e)): each replica is written by the iterations its
        thread runs, so where the value or a condition around the store depends on those variables the replicas
        would disagree. Refused: nothing defines which iteration's value every thread should hold."""
        conditions: list = []

        def visit(node: Any) -> None:
            if isinstance(node, tirx.IfThenElse):
                conditions.append(node.condition)
                visit(node.then_case)
                conditions.pop()
                if node.else_case is not None:
                    conditions.append(node.condition)
                    visit(node.else_case)
                    conditions.pop()
            elif isinstance(node, tirx.BufferStore):
                buf = node.buffer
                layout = self.layouts.get(buf)
                if scope_of(buf) != FRAGMENT_SCOPE or layout is None or layout.replicate_size <= 1 \
                        or buf in self.reducers:
                    return
                missing = [v for v in nest.loop_vars if not any(uses_var(i, v) for i in node.indices)]
                deciding = [node.value, *conditions]
                varying = [v for v in missing if any(uses_var(e, v) for e in deciding)]
                if varying:
                    names = ", ".join(f"`{v.name}`" for v in varying)
                    raise CompileError(
                        f"fragment `{buf.name}` is written as `{buf.name}[{', '.join(map(str, node.indices))}]` by "
                        f"every value of {names} of this T.Parallel loop, with a value (or under a condition) that "
                        f"depends on {names}; its copies on the threads that run those iterations would differ. "
                        f"Reduce along {names} first (T.reduce_* into a fragment indexed without it), or write it "
                        f"from a loop over its own indices", nest.loc, STAGE)
            elif isinstance(node, tirx.SeqStmt):
                for stmt in node.seq:
                    visit(stmt)
            elif hasattr(node, "body"):
                visit(node.body)

        visit(nest.body)

    def check(self) -> None:
        for nest in self.nests:
            self._check_replicated_writes(nest)
        for frag in self.fragments:
            if frag not in self.layouts:
                # never walked by a loop nor placed by an op: one element per thread slot, replicated nowhere
                shape = [as_int(e) for e in frag.ty.shape]
                if any(e is None for e in shape):
                    raise CompileError(f"fragment `{frag.name}` must have a constant shape", stage=STAGE)
                self.layouts[frag] = free_plan(shape, self.threads_of(frag).count, 1).fragment
                self.origin[frag] = "default placement"
        for nest in self.nests:
            for buf, indices in nest.accesses:
                if buf is nest.source or buf in nest.exchanges:
                    continue
                conflict = self._conflict(nest, buf, indices)
                if conflict is not None:
                    self._exchange(nest, buf, conflict)
        for k, op in enumerate(self.ops):
            if isinstance(op, Reduce) and op.src.buffer in self.layouts and op.dst.buffer in self.layouts \
                    and scope_of(op.dst.buffer) == FRAGMENT_SCOPE:
                reduced = reduce_fragment(self.layouts[op.src.buffer], op.dim)  # its infer_layout checked this
                if not self.layouts[op.dst.buffer].is_equal(reduced):
                    self._exchange_reduce(k, op, reduced)

    def _exchange_reduce(self, k: int, op: Reduce, reduced: Fragment) -> None:
        """The reduction `op` writes a scratch fragment laid out as `reduced`, relaid out to its destination (laid
        out otherwise by another op) through a shared tile."""
        dst = op.dst.buffer
        shape = self._shape(dst)
        why = (f"T.reduce_{op.kind} at {op.loc} leaves its results as {reduced!r}, but `{dst.name}` is laid out as "
               f"{self.layouts[dst]!r} ({self.origin.get(dst)})")
        if [as_int(m) for m in op.dst.mins] != [0] * len(shape) or [as_int(e) for e in op.dst.extents] != shape:
            raise CompileError(f"layout conflict: {why}; reduce into a whole fragment", op.loc, STAGE)
        dtype = str(dst.ty.dtype.dtype)
        scratch = Tb.buffer(shape, dtype, scope=FRAGMENT_SCOPE)
        IRBuilder.name(f"{dst.name}_reduced", scratch)
        tile = Tb.buffer(shape, dtype, scope=EXCHANGE_SCOPE)
        IRBuilder.name(f"{dst.name}_exchange", tile)
        self.layouts[scratch] = reduced
        self.origin[scratch] = f"T.reduce_{op.kind} at {op.loc}"
        self.fragments.append(scratch)
        self.reduce_exchanges.append(ReduceExchange(self.op_nodes[k], op, scratch, tile, self.op_reach[k]))
        nbytes = int(np.prod(shape)) * tvm.runtime.DataType(dtype).bits // 8
        warn_once(f"reduce exchange at {op.loc}: {why}",
                  f"{op.loc}: the result of T.reduce_{op.kind} reaches `{dst.name}` through a {nbytes}-byte "
                  f"shared-memory tile{'' if op.clear else ' (and its old values come the other way first)'}, each "
                  f"time it runs, because {why}. Reducing into a fragment of its own avoids the exchange.")

    def _conflict(self, nest: NestDecision, buf, indices, layout: Fragment | None = None,
                  every_offset: bool = False) -> str | None:
        """Why an iteration of the nest would touch an element of `buf` its thread does not hold (None if
        none would). With `every_offset`, the loop-invariant part of an index (`s * 16` in `f[r + s * 16]`) takes
        every value of its modular set, each iteration checked where the element it reaches is inside the
        fragment: whatever the loop around gives it at run time, an access inside the fragment is checked."""
        layout = layout if layout is not None else self.layouts[buf]
        loop_thread, _ = nest.plan.fragment.evaluate_all()  # shape: extents + [replicas]
        frag_thread, _ = layout.evaluate_all()
        # the iterations, and within each the values of the loops inside the body (the iteration's thread runs them)
        points = np.indices(list(loop_thread.shape[:-1]) + [extent for _, extent in nest.inner.values()])
        loop_thread = loop_thread.reshape(loop_thread.shape[:-1] + (1,) * len(nest.inner) + loop_thread.shape[-1:])
        shape = self._shape(buf)
        # an index the nest holds fixed (a serial loop's `k`) may take any value: check every element it reaches
        walked = list(nest.loop_vars) + list(nest.inner)
        fixed = [d for d, e in enumerate(indices) if as_int(e) is None and not any(uses_var(e, v) for v in walked)]
        # only the iterations the `if`s around the access let through make it (`if i < 16:` around `f[i + s * 16]`)
        made = self._made(nest, indices, points)
        # so may the invariant part of an index that adds one to the nest's variables (`jj * 4 + j`): its values
        # that keep the access inside the fragment
        offsets = {d: self._invariant_values(nest, parts, shape[d], points, made, every_offset)
                   for d, parts in ((d, invariant_terms(e, walked)) for d, e in enumerate(indices)) if parts is not None}
        for values in itertools.product(*[range(shape[d]) for d in fixed], *[offsets[d][1] for d in offsets]):
            chosen = list(indices)
            for d, value in zip(fixed, values):
                chosen[d] = tirx.IntImm("int32", value)
            for d, value in zip(offsets, values[len(fixed):]):
                chosen[d] = offsets[d][0] + value
            conflict = self._conflict_at(nest, buf, chosen, layout, loop_thread, frag_thread, points, shape, made,
                                         every_offset)
            if conflict is not None:
                return conflict
        return None

    @staticmethod
    def _made(nest: NestDecision, indices, points) -> Any:
        """Which of the `points` (the iterations, inner loops included) make the access with these indices: True
        for all but those an `if` around it over the loop variables rules out."""
        guards = access_guards(nest.body, tuple(indices), list(nest.loop_vars) + list(nest.inner))
        made = np.ones(points.shape[1:], dtype=bool)
        env = {v: points[k] for k, v in enumerate(nest.loop_vars)}
        env.update({v: points[k] + lo for k, (v, (lo, _)) in enumerate(nest.inner.items(), start=len(nest.loop_vars))})
        for condition in guards:
            try:
                made &= np.broadcast_to(evaluate(condition, env) != 0, made.shape)
            except (KeyError, TypeError, ValueError):  # not an integer condition: every iteration may make it
                continue
        return made

    @staticmethod
    def _invariant_values(nest: NestDecision, parts: tuple, extent: int, points, made,
                          every: bool = False) -> tuple[Any, list[int]]:
        """(the walked part, the values the invariant part can take) of an index `invariant + walked`: every value
        of its modular set (`jj * 4`: the multiples of 4) that keeps the walked part's range, over the iterations
        that make the access, inside [0, extent); with `every`, each that keeps some of it inside."""
        invariant, walked = parts
        step = tvm.sym.Analyzer().modular_set(invariant)
        if every:
            stride = max(step.coeff, 1)
            return walked, list(range(step.base % stride - (extent // stride + 1) * stride, extent, stride))
        env = {v: points[k] for k, v in enumerate(nest.loop_vars)}
        env.update({v: points[k] + lo for k, (v, (lo, _)) in enumerate(nest.inner.items(), start=len(nest.loop_vars))})
        try:
            values = np.broadcast_to(evaluate(walked, env), made.shape)[made]
        except (KeyError, TypeError, ValueError):  # not an integer expression of the nest's variables alone
            values = None
        if values is None:
            analyzer = tvm.sym.Analyzer()
            for v, n in zip(nest.loop_vars, nest.extents):
                analyzer.bind(v, tvm.ir.Range.from_min_extent(0, n))
            for v, (lo, n) in nest.inner.items():
                analyzer.bind(v, tvm.ir.Range.from_min_extent(lo, n))
            bound = analyzer.const_int_bound(walked)
            values = np.array([bound.min_value, bound.max_value])
        if values.size == 0:
            return walked, []
        low, high, stride = int(values.min()), int(values.max()), max(step.coeff, 1)
        return walked, [value for value in range(step.base % stride, extent, stride)
                        if value + low >= 0 and value + high < extent]

    def _conflict_at(self, nest, buf, indices, layout, loop_thread, frag_thread, points, shape, made,
                     inside_only: bool = False) -> str | None:
        try:  # the fragment element each iteration touches
            env = {v: points[k] for k, v in enumerate(nest.loop_vars)}
            for k, (v, (lo, _)) in enumerate(nest.inner.items(), start=len(nest.loop_vars)):
                env[v] = points[k] + lo
            key = tuple(np.broadcast_to(evaluate(e, env), points.shape[1:]) for e in indices)
        except (KeyError, TypeError, ValueError):
            key = None
        if key is not None and inside_only:  # only the iterations that reach an element of the fragment
            made = made & np.logical_and.reduce([(k >= 0) & (k < n) for k, n in zip(key, shape)])
        if key is None or any((((k < 0) | (k >= n)) & made).any() for k, n in zip(key, shape)):
            raise CompileError(
                f"fragment `{buf.name}` is accessed as `{buf.name}[{', '.join(map(str, indices))}]` in a T.Parallel "
                "loop; index a fragment with integer expressions of the loop variables (and of constant-bound loops inside "
                "its body) that stay inside it",
                nest.loc, STAGE)
        key = tuple(np.where(made, k, 0) for k in key)  # an iteration that does not make the access: any element
        for rep in range(loop_thread.shape[-1]):
            owners = loop_thread[..., rep]
            held = frag_thread[key]  # (... , fragment replicas)
            if not np.all((held == owners[..., None]).any(axis=-1) | ~made):
                runs = f"where `{nest.source.name}` lives" if nest.source is not None else \
                    "by its loop_layout" if nest.recipe["kind"] == "user" else "on its own partition"
                return (f"the T.Parallel loop runs {runs} ({nest.plan.fragment!r}), but fragment `{buf.name}` is "
                        f"laid out as {layout!r} ({self.origin.get(buf)}): an iteration would touch an element "
                        "another thread holds")
        return None

    def _exchange(self, nest: NestDecision, buf, conflict: str) -> None:
        """Give the nest a copy of `buf` in the layout it needs, exchanged through shared memory. A fragment the
        nest only reads, with an index no register layout can serve (`A[i, j // 32]`: one element for several
        threads' iterations), is read from the shared tile itself."""
        accesses = [indices for b, indices in nest.accesses if b is buf]
        written = any(a.is_store and a.buffer.same_as(buf) for a in collect_accesses(nest.body))
        try:
            needed = self._implied(buf, accesses[0], nest)
            if any(self._conflict(nest, buf, indices, needed) is not None for indices in accesses):
                needed = None
        except CompileError:
            needed = None
        if needed is None and written:
            raise CompileError(f"layout conflict: {conflict}", nest.loc, STAGE)
        shape, dtype = self._shape(buf), str(buf.ty.dtype.dtype)
        tile = Tb.buffer(shape, dtype, scope=EXCHANGE_SCOPE)
        IRBuilder.name(f"{buf.name}_exchange", tile)
        if needed is None:
            copy = tile
        else:
            copy = Tb.buffer(shape, dtype, scope=FRAGMENT_SCOPE)
            IRBuilder.name(f"{buf.name}_relaid", copy)
            self.layouts[copy] = needed
            self.origin[copy] = f"the T.Parallel loop at {nest.loc}"
            self.fragments.append(copy)
        nest.exchanges[buf] = Exchange(copy, tile, written)
        nbytes = int(np.prod(shape)) * tvm.runtime.DataType(dtype).bits // 8
        how = ("read from a" if copy is tile else "exchanged through a") + f" {nbytes}-byte shared-memory tile " + \
            ("in" if copy is tile else "around" if written else "before")
        warn_once(f"layout exchange at {nest.loc}: {conflict}",
                  f"{nest.loc}: fragment `{buf.name}` is {how} this T.Parallel loop, each time it runs, because "
                  f"{conflict}. Where the two layouts come from different gemm instructions or warp policies, making "
                  "them agree avoids the exchange.")

