"""The element accesses outside T.Parallel to a gemm accumulator (laid out by the gemm, one thread an element), which
LayoutInference leaves in the gemm's layout: each must provably touch an element of the accessing thread, as
hand-written epilogues index it (`acc[i, j]` with i, j functions of the thread index such that the layout maps (i, j)
to that very thread). LowerFragmentAccess then reads the thread's own slot. Anything else is an error naming the
access."""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError
from ..ir.utils import TensorLoad, Var, collect_accesses, loc_of, substitute
from ..tileop import is_tile_op
from .layout_access import has_call
from .layout_decisions import STAGE
from .partition_parallel_loop import is_parallel
from .thread_guard import map_with_guards


def check_owned_accesses(inference: Any, owned: list) -> None:
    """Check every element access to the fragments `owned` (gemm accumulators accessed outside T.Parallel) in
    `inference`'s function."""
    if owned:
        _OwnedAccesses(inference, owned).run()


class _OwnedAccesses:
    def __init__(self, inference: Any, owned: list):
        self.inference = inference
        self.owned = owned
        self.threads = inference.threads
        self.tid = self.threads.linear_thread_id()
        self.ana = self._bound_analyzer()
        self.locs = [None]  # the innermost enclosing loop that names its source line
        self.checked = 0

    def _bound_analyzer(self) -> tvm.sym.Analyzer:
        """An analyzer knowing the thread indices' ranges, the loops' ranges and the index arithmetic bound by lets."""
        ana = tvm.sym.Analyzer()
        for tag, var in self.threads.vars.items():
            ana.bind(var, tvm.ir.Range(0, self.threads.extents[tag]))

        def on_node(node):
            if isinstance(node, tirx.For):
                ana.bind(node.loop_var, tvm.ir.Range.from_min_extent(node.min, node.extent))
            elif isinstance(node, tirx.LetStmt) and not has_call(node.value):
                ana.bind(node.var, node.value)  # index arithmetic (`row = tx // 8`); not loads or calls

        tvm_ffi.structural_walk(self.inference.func.body, [(tirx.For, on_node), (tirx.LetStmt, on_node)],
                                order="pre")
        return ana

    def run(self) -> None:
        def on_for(node, mutator, guards):
            if is_parallel(node):
                return node
            self.locs.append(loc_of(node) or self.locs[-1])
            try:
                return mutator.default_mutate(node)
            finally:
                self.locs.pop()

        def on_eval(node, mutator, guards):
            if not is_tile_op(node.value):
                self.check(node, guards)
            return node

        def on_store(node, mutator, guards):
            if isinstance(node, tirx.LetStmt):  # its value here, its body as any other statements
                self.check(node.value, guards)
                return mutator.default_mutate(node)
            self.check(node, guards)  # a BufferStore or a Bind: no statements inside
            return node

        map_with_guards(self.inference.func.body, self.threads, on_for, on_eval, on_store)
        self._refuse_unchecked()

    def _proved_own(self, layout, indices, home, reach) -> bool:
        if int(layout.replicate_size) != 1:
            return False
        thread = layout.thread(list(indices)) + home.first
        tid, ana = self.tid, self.ana
        if isinstance(tid, Var) and "threadIdx.y" not in self.threads.vars and "threadIdx.z" not in self.threads.vars:
            # count threads from the range's first: `(tx - 128) // 8` simplifies once tx = 128 + t
            rel = tirx.Var("t", str(tid.ty.dtype))
            ana.bind(rel, tvm.ir.Range(0, reach.count))
            thread = substitute(thread, {tid: rel + reach.first})
            return ana.can_prove_equal(thread, rel + reach.first)
        with ana.constraint_scope(tirx.And(tid >= reach.first, tid < reach.first + reach.count)):
            return ana.can_prove_equal(thread, tid)

    def check(self, node, guards) -> None:
        inference = self.inference
        for access in collect_accesses(node):
            if access.buffer not in self.owned:
                continue
            self.checked += 1
            buf = access.buffer
            layout, home = inference.layouts[buf], inference.threads_of(buf)
            reach = inference._reach(guards, None, "an element access", self.locs[-1])
            if not self._proved_own(layout, access.indices, home, reach):
                index = ", ".join(str(i) for i in access.indices)
                raise CompileError(
                    f"the element access `{buf.name}[{index}]` outside T.Parallel (run by {reach}) cannot be "
                    f"shown to touch an element of the accessing thread: `{buf.name}` is laid out by "
                    f"{inference.origin.get(buf)} as {layout!r}, so thread t may only access elements that layout "
                    "puts on t. Index it through the layout (e.g. rows and columns derived from the thread "
                    "index), walk it with T.Parallel, or copy it to shared memory first", self.locs[-1], STAGE)

    def _refuse_unchecked(self) -> None:
        """Accesses elsewhere (an `if` condition, a let binding) were not checked: they must not be lowered
        unchecked."""
        unchecked = []

        def count(node):
            if isinstance(node, tirx.For) and is_parallel(node):
                return tvm_ffi.WalkResult.SKIP
            if isinstance(node, tirx.Evaluate) and is_tile_op(node.value):
                return tvm_ffi.WalkResult.SKIP
            if isinstance(node, TensorLoad) and node.source in self.owned:
                unchecked.append(node.source)
            if isinstance(node, tirx.BufferStore) and node.buffer in self.owned:
                unchecked.append(node.buffer)
            return None

        tvm_ffi.structural_walk(self.inference.func.body, [(tirx.For, count), (tirx.Evaluate, count),
                                                           (TensorLoad, count), (tirx.BufferStore, count)],
                                order="pre")
        if len(unchecked) != self.checked:
            first = unchecked[0]
            raise CompileError(
                f"an element access to `{first.name}` outside T.Parallel sits in a condition, where it cannot "
                f"be checked to touch the accessing thread's own element of the gemm accumulator (laid out by "
                f"{self.inference.origin.get(first)}); read it into a variable first (`v = {first.name}[...]`)",
                None, STAGE)
