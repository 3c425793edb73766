"""LayoutInference's first step: what the function holds, read once. Its fragments, the T.Parallel nests over them
(and, under TL_DISABLE_THREAD_STORAGE_SYNC, those over none), its tile ops, the threads that run each, and the
fragments accessed element by element outside both."""

from __future__ import annotations

import tvm_ffi
from tvm import tirx

from ..errors import CompileError
from ..ir.utils import TensorLoad, collect_accesses, loc_of, scope_of
from ..tileop import is_tile_op, parse_tile_op
from .layout_access import constant_from_zero, inner_loops
from .layout_decisions import FRAGMENT_SCOPE, STAGE, NestDecision
from .partition_parallel_loop import collect_nest, is_parallel, nest_extents, planned_by_user
from .thread_guard import ThreadRange, map_with_guards, reaching_threads


class Collection:
    """Fills the inference's lists (`fragments`, `nests`, `plain_nests`, `ops`, `serial`) and the threads each
    fragment lives on (`reach`). A part of _Inference (layout_inference.py), which holds the state."""

    def _guards(self) -> dict:
        """The thread conditions around each T.Parallel nest and tile op, by node handle."""
        found: dict = {}

        def on_for(node, mutator, guards):
            if is_parallel(node):
                found[node.__chandle__()] = guards
                return node
            return mutator.default_mutate(node)

        def on_eval(node, mutator, guards):
            found[node.__chandle__()] = guards
            return node

        map_with_guards(self.func.body, self.threads, on_for, on_eval)
        return found

    def _reach(self, guards, node, construct: str, loc) -> ThreadRange:
        if not guards:
            return ThreadRange(0, self.threads.num_threads)
        return reaching_threads(guards, self.threads, self.analyzer(), node, STAGE, construct, loc)

    def use(self, buf, reach: ThreadRange, where: str, loc) -> None:
        """`buf` is used by `reach`'s threads: its layout is made over them, so every use must agree."""
        known = self.reach.get(buf)
        if known is None:
            self.reach[buf] = (reach, where)
        elif known[0] != reach:
            raise CompileError(
                f"fragment `{buf.name}` is used by {reach} ({where}) and by {known[0]} ({known[1]}): a fragment "
                "lives on the threads of one range and every use must run on the same threads. Use it in one "
                "T.ws region (or under one thread guard), or pass the values through shared memory", loc, STAGE)

    def threads_of(self, buf) -> ThreadRange:
        known = self.reach.get(buf)
        return known[0] if known is not None else ThreadRange(0, self.threads.num_threads)

    def collect(self) -> None:
        guards = self._guards()

        def on_alloc(node):
            if scope_of(node.buffer) == FRAGMENT_SCOPE:
                self.fragments.append(node.buffer)

        def on_for(node):
            if is_parallel(node):
                nest, body = collect_nest(node)
                accesses = [(a.buffer, a.indices) for a in collect_accesses(body) if scope_of(a.buffer) == FRAGMENT_SCOPE]
                self.walk_order[node.__chandle__()] = len(self.walk_order)
                if not accesses and self.user_barriers and constant_from_zero(nest) and not inner_loops(body):
                    reach = self._reach(guards.get(node.__chandle__()), node, "T.Parallel", loc_of(node))
                    self.plain_nests.append(NestDecision(node, [n.loop_var for n in nest], nest_extents(nest, STAGE), body,
                                                  [], reach))
                if accesses:
                    reach = self._reach(guards.get(node.__chandle__()), node, "T.Parallel", loc_of(node))
                    names = tuple(dict.fromkeys(buf.name for buf, _ in accesses))
                    loop_vars, extents = [n.loop_var for n in nest], nest_extents(nest, STAGE, names)
                    self.nests.append(NestDecision(node, loop_vars, extents, body, accesses, reach, inner=inner_loops(body)))
                    user = planned_by_user(node, extents, body, loop_vars[-1], reach, self.threads.num_threads,
                                           self.analyzer, self.disable_vectorize, STAGE)
                    if user is not None:  # T.Parallel(..., loop_layout=F): F is the plan, the fragments follow it
                        self.nests[-1].plan = user[0]
                        self.nests[-1].recipe = {"kind": "user", "fragment": user[0].fragment, "width": user[1]}
                        self.nests[-1].reason = "its loop_layout= (the user's plan; the fragments follow it)"
                    for buf, _ in accesses:
                        self.use(buf, reach, f"the T.Parallel loop at {loc_of(node)}", loc_of(node))
                return tvm_ffi.WalkResult.SKIP  # the nest's inner loops belong to it
            return None

        def on_eval(node):
            if is_tile_op(node.value):
                op = parse_tile_op(node.value)
                reach = self._reach(guards.get(node.__chandle__()), None, op.construct, op.loc)
                self.ops.append(op)
                self.op_reach.append(reach)
                self.op_nodes.append(node.__chandle__())
                for buf in self._op_buffers(op):
                    if scope_of(buf) == FRAGMENT_SCOPE:
                        self.use(buf, reach, f"{op.construct} at {op.loc}", op.loc)
                return tvm_ffi.WalkResult.SKIP  # its operands are regions, placed by the op
            return None

        def on_access(buffer):
            if scope_of(buffer) == FRAGMENT_SCOPE and buffer not in self.serial:
                self.serial.append(buffer)

        tvm_ffi.structural_walk(self.func.body, [
            (tirx.AllocBuffer, on_alloc), (tirx.For, on_for), (tirx.Evaluate, on_eval),
            (TensorLoad, lambda n: on_access(n.source)), (tirx.BufferStore, lambda n: on_access(n.buffer))],
            order="pre")

