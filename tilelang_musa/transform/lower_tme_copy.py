"""LowerTmeCopy: TME copies (`T.tma_copy`; `T.copy` stores from shared memory and hinted loads) become TME instructions.

Runs after LayoutInference, so the shared tile's layout is final (the engine's swizzle must produce it; an SQMMA
operand's layout is chosen there), and before the shared layouts are applied. Each copy is issued by one thread:
the first of the contiguous range of threads that reach it (the `if tx < ...` guards around it, as for T.Parallel
nests: thread_guard.py), or with `leader_scope_threads=n` the first of every n threads of that range. A T.copy load
(given cache hints) waits for itself: on a barrier of the compiler's, which all those threads arrive on. The global
tensors read or written are recorded in the `tl.tme_descriptors` function attribute: the printer adds one
descriptor parameter per tensor and the host wrapper builds it (codegen/host.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..diagnostics import warn_once
from ..errors import CompileError
from ..ir.attrs import ARRIVE_COUNTS, BARRIER_SCOPE, DESCRIPTORS_ATTR
from ..ir.options import CompileOptions
from ..ir.utils import TensorLoad, thread_info
from ..target import arch_of, archs_with
from ..tileop import parse_tile_op
from ..tileop.base import LowerArgs, call_attr, call_loc
from ..tileop.tme_copy import (
    TME_STORE_ARRIVE, TME_STORE_WAIT, TME_STORE_WAIT_WRITES, NotTme, TmeCopy, descriptor_name, descriptor_spec,
    lower_tme, not_tme_error,
)
from .buffer_roles import view_buffers
from .lower_async_barriers import BARRIER_SYNC_OP
from .lower_global_layout import global_layouts
from .lower_shared_layout import shared_layouts
from .partition_parallel_loop import thread_analyzer
from .pass_base import tl_pass
from .thread_guard import ThreadRange, conjuncts, reaching_threads, thread_conditions

STAGE = "LowerTmeCopy"


def lower_tme_copy(func: tirx.PrimFunc, configs: CompileOptions | dict) -> tirx.PrimFunc:
    lowering = _TmeCopyLowering(func, CompileOptions.of(configs))
    body = lowering.rewrite(func.body)
    if body.same_as(func.body):
        return func
    if lowering.sync_barriers:
        body = _allocate_at_top(body, [tirx.AllocBuffer(buf, {ARRIVE_COUNTS: [tirx.const(count, "int32")]})
                                       for (_, count), buf in lowering.sync_barriers.items()])
    func = tirx.PrimFunc(func.params, body, ret_type=func.ret_type, attrs=func.attrs)
    if lowering.descriptors:
        func = func.with_attr(DESCRIPTORS_ATTR, lowering.descriptors)
    return func


class _TmeCopyLowering:
    """One walk over a kernel body: tracks the thread guards around each statement, lowers each TME copy (or
    falls back to a plain copy), and collects the descriptors and the compiler's barriers the copies need."""

    def __init__(self, func: tirx.PrimFunc, options: CompileOptions):
        self.func = func
        self.options = options
        self.threads = thread_info(func)
        self.target = func.attrs["target"] if func.attrs is not None and "target" in func.attrs else None
        self.arch = arch_of(self.target) if self.target is not None else None
        self.layouts = shared_layouts(func)
        self.renumbered = global_layouts(func)  # tensors annotated with a layout: a descriptor cannot renumber them
        self.params = list(func.params)
        self.analyzer = thread_analyzer(self.threads)
        self.per_thread = _per_thread_vars(func, self.threads)
        # Outputs: the global tensors' descriptors, and the (first, count) threads reaching a T.copy TME load -> the
        # barrier it waits on.
        self.descriptors: dict[str, list] = {}
        self.sync_barriers: dict[tuple[int, int], Any] = {}
        # Where the walk is: the thread-range conditions of the enclosing `if`s, and how many enclosing `if`s have
        # conditions that are not thread-id ranges (data, block indices): which threads take such a branch is not
        # known here, so the elected leader may not be among them; a T.copy there stays a plain copy.
        self.guards: list[Any] = []
        self.data_conditions = 0

    def rewrite(self, body: Any) -> Any:
        return tvm_ffi.structural_mutate(body, [(tirx.IfThenElse, self._on_if), (tirx.Evaluate, self._on_evaluate)])

    def _on_if(self, node, mutator):
        conds = thread_conditions(node.condition, self.threads)
        other = len(conds) < len(conjuncts(node.condition)) and not _block_uniform(node.condition, self.threads,
                                                                                    self.per_thread)
        self.data_conditions += other
        self.guards.extend(conds)
        then_case = mutator.mutate(node.then_case)
        del self.guards[len(self.guards) - len(conds):]
        else_case = node.else_case
        if else_case is not None:
            negated = [tirx.Not(node.condition)] if conds else []
            self.guards.extend(negated)
            else_case = mutator.mutate(else_case)
            del self.guards[len(self.guards) - len(negated):]
        self.data_conditions -= other
        if then_case.same_as(node.then_case) and (else_case is None or else_case.same_as(node.else_case)):
            return node
        return tirx.IfThenElse(node.condition, then_case, else_case)

    def _on_evaluate(self, node, mutator):
        name = str(node.value.op.name) if isinstance(node.value, tvm.ir.Call) and \
            isinstance(node.value.op, tvm.ir.Op) else None
        if name in (TME_STORE_ARRIVE, TME_STORE_WAIT) and self.arch is not None and not self.arch.has_tme:
            construct = "T.tma_store_wait" if name == TME_STORE_WAIT else "T.tma_store_arrive"
            raise CompileError(f"{construct}: {self.arch.name} has no TME (the tensor memory engine exists on "
                               f"{archs_with('has_tme')[0]} and later)", call_loc(node.value), STAGE)
        if name == TME_STORE_WAIT and call_attr(node.value, TME_STORE_WAIT_WRITES):
            # Moore Threads' port refuses it too: the SDK's only store wait is __musa_tme_store_read_wait.
            raise CompileError("MUSA T.tma_store_wait only supports read=True (got read=False): MUSA's store wait "
                               "orders the TME stores' reads of shared memory, and no wait for their global writes "
                               "is documented", call_loc(node.value), STAGE)
        if name != TmeCopy.op_name:
            return node
        return self._lower(parse_tile_op(node.value))

    def _lower(self, op: TmeCopy) -> Any:
        """The copy as TME instructions; a T.copy the TME cannot do is a plain copy, a T.tma_copy an error."""
        if not op.explicit and (self.options.disable_tma_lower or self.data_conditions):
            return self._plain_copy(op)
        if self.arch is not None and not self.arch.has_tme:
            if not op.explicit:
                return self._plain_copy(op)
            raise CompileError(f"T.tma_copy: {self.arch.name} has no TME (the tensor memory engine exists on "
                               f"{archs_with('has_tme')[0]} and later); use T.copy", op.loc, STAGE)
        if op.is_load and op.barrier is None and op.explicit:
            raise CompileError("T.tma_copy: a load (global -> shared) needs barrier=...: the copy arrives on it, and "
                               "the threads wait on it before reading the tile", op.loc, STAGE)
        if op.global_region.buffer in self.renumbered:
            if not op.explicit:
                return self._plain_copy(op)
            raise not_tme_error(op, f"{op.global_region.name} is accessed through its T.annotate_layout layout, which a "
                                "TME descriptor (dims and strides) cannot express")
        shared = op.shared_region.buffer
        if shared in view_buffers(self.func):
            if not op.explicit:
                return self._plain_copy(op)
            raise not_tme_error(op, f"{shared.name} is a T.view / T.reshape view; copy into the viewed buffer")
        try:
            plan = op.plan(self.params, self.layouts.get(shared))
        except NotTme as why:
            if not op.explicit:
                return self._plain_copy(op)
            raise not_tme_error(op, str(why)) from None
        g = op.global_region.buffer
        self.descriptors[descriptor_name(g, plan.split)] = descriptor_spec(g, plan.split)
        if op.is_load and op.barrier is None:  # a T.copy load: on a barrier of the compiler's, waited for here
            barrier = self._sync_barrier(_reaching(self.guards, self.threads, self.analyzer(), op))
            issue = lower_tme(dataclasses.replace(op, barrier=barrier), plan, self._leader_condition(op))
            return tirx.SeqStmt([issue, tirx.Evaluate(tirx.call_intrin("int32", BARRIER_SYNC_OP, barrier))])
        return lower_tme(op, plan, self._leader_condition(op))

    def _sync_barrier(self, reach: ThreadRange) -> Any:
        """The compiler's barrier that the threads reaching a T.copy TME load arrive on: one per range of threads,
        since copies of different ranges (warp-specialized producers) may be in flight at once, and a barrier's
        phases can only count one sequence of copies."""
        key = (reach.first, reach.count)
        if key not in self.sync_barriers:
            buf = Tb.buffer([1], "uint64", scope=BARRIER_SCOPE)
            same_count = any(count == reach.count for _, count in self.sync_barriers)
            name = "tme_barrier" if not self.sync_barriers else f"tme_barrier_{reach.count}" if not same_count \
                else f"tme_barrier_{reach.count}_t{reach.first}"
            IRBuilder.name(name, buf)
            self.sync_barriers[key] = buf
        return self.sync_barriers[key][0]

    def _leader_condition(self, op: TmeCopy) -> Any:
        """Which thread issues the copy: the first that reaches it, or the first of every leader_scope_threads."""
        reach: ThreadRange = _reaching(self.guards, self.threads, self.analyzer(), op)
        tid = self.threads.linear_thread_id()
        scope = op.leader_scope_threads
        if scope is not None and scope < reach.count:
            if reach.count % scope:
                raise CompileError(f"T.tma_copy: leader_scope_threads={scope} does not divide the {reach.count} "
                                   "threads that reach the copy", op.loc, STAGE)
            offset = tid - reach.first if reach.first else tid
            return tirx.EQ(tirx.FloorMod(offset, scope), 0)
        return tirx.EQ(tid, reach.first)

    def _plain_copy(self, op: TmeCopy) -> Any:
        """A T.copy that is not a TME copy, lowered as Copy does (its cache hints dropped, with a warning)."""
        if op.hinted:
            warn_once("T.copy cache policy", "T.copy: eviction_policy / inner_cache_policy / outer_cache_policy "
                      "are cache hints of TME copies; this copy is not a TME copy (see T.tma_copy's rules) and "
                      "runs without them")
        from ..tileop.copy import Copy

        args = LowerArgs(self.target, self.threads.linear_thread_id(), self.threads.num_threads, {}, self.options)
        plain = Copy(op.src, op.dst, op.loc, op.coalesced_width).lower(args)
        if not op.pipelined:
            return plain
        # Every thread's part is stored before the threads arrive on the pipeline's barrier.
        return tirx.SeqStmt([plain, tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))])


def _block_uniform(cond: Any, threads, per_thread: set) -> bool:
    """Whether every thread of a block takes the same branch: the condition reads no memory, no thread index and no
    bound or parallel-loop variable (which may hide either): block indices, serial loop variables and sizes only,
    e.g. a pipeline's guard on a run-time trip count."""
    found = []

    def visit(node):
        if isinstance(node, TensorLoad) or (isinstance(node, tvm.ir.expr.Var) and node in per_thread):
            found.append(node)

    tvm_ffi.structural_walk(cond, [(TensorLoad, visit), (tvm.ir.expr.Var, visit)], order="pre")
    return not found


def _per_thread_vars(func: tirx.PrimFunc, threads) -> set:
    """Thread indices, variables bound by statements, and the variables of parallel / vectorized loops."""
    out = set(threads.vars.get(t) for t in ("threadIdx.x", "threadIdx.y", "threadIdx.z")) - {None}

    def on_bind(node):
        out.add(node.var)

    def on_for(node):
        if node.kind not in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED):
            out.add(node.loop_var)

    tvm_ffi.structural_walk(func.body, [(tirx.Bind, on_bind), (tirx.For, on_for)], order="pre")
    return out


def _allocate_at_top(body: Any, allocs: list) -> Any:
    """`allocs` first in the body of the innermost kernel launch attribute (where T.alloc_barrier's would be)."""

    def on_attr(node, mutator):
        if node.attr_key != "thread_extent":
            return mutator.default_mutate(node)
        inner: list = []
        tvm_ffi.structural_walk(node.body, [(tirx.AttrStmt, lambda a: inner.append(a)
                                             if a.attr_key == "thread_extent" else None)])
        if inner:
            return mutator.default_mutate(node)
        return tirx.AttrStmt(node.node, node.attr_key, node.value, tirx.SeqStmt([*allocs, node.body]))

    return tvm_ffi.structural_mutate(body, [(tirx.AttrStmt, on_attr)])


def _reaching(guards: list, threads, analyzer, op: TmeCopy) -> ThreadRange:
    try:
        return reaching_threads(list(guards), threads, analyzer, None, STAGE)
    except CompileError:
        raise CompileError("T.tma_copy: the threads that reach the copy must be a contiguous range of thread ids "
                           "known at compile time (one of them issues it); guard it with a range such as "
                           "`tx < 128`", op.loc, STAGE) from None


def LowerTmeCopy(configs):  # noqa: N802
    options = CompileOptions.of(configs)
    return tl_pass(STAGE, lambda func: lower_tme_copy(func, options))
