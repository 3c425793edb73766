"""Which branch conditions every thread of a block evaluates alike, so that a barrier may go inside the branch.

TVM's ThreadSync places no barrier under an `if` unless its condition is wrapped in `tvm_thread_invariant`. A
condition is uniform when it reads no thread index and nothing that differs between threads:

    a = mask_f[i]            # mask_f: a thread-private array every thread fills alike (T.copy of a global row)
    if a >= 0:               # uniform: a barrier between the copy into A_shared and its read may go here
        ...

Uniform values: constants, block indices, loop variables of loops with uniform bounds, binds of uniform values,
global and shared loads at uniform indices, and loads of thread-private arrays whose every store writes a uniform
value at a uniform index under uniform control. A call_extern is taken to differ between threads (shuffles,
atomics, lane indices), except the template functions known to read memory and nothing else (T.all_of /
T.any_of: `if T.all_of(BlockMask[by, k, :]):` is uniform); pure calls and intrinsics are uniform when their
arguments are.
"""

from __future__ import annotations

from typing import Any, Callable

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.ops import PURE_READING_EXTERNS
from ..ir.utils import TensorLoad, scope_of
from .thread_guard import conjuncts, thread_conditions

THREAD_INVARIANT = "tirx.tvm_thread_invariant"
_PRIVATE_SCOPES = ("local", "local.var", "local.fragment")


class _Uniformity:
    def __init__(self, body: Any):
        self.varying_vars: set = set()
        self.private: set = set()  # thread-private arrays
        self.varying_arrays: set = set()  # ... of those, the ones that may differ between threads
        self.body = body

    def expr_varies(self, expr: Any) -> bool:
        found = []

        def on_var(v):
            if v in self.varying_vars:
                found.append(v)

        def on_load(n):
            if n.source in self.varying_arrays:
                found.append(n)

        def on_call(n):
            op = n.op
            if isinstance(op, tvm.ir.Op) and str(op.name) == "tirx.call_extern" \
                    and str(n.args[0].value) not in PURE_READING_EXTERNS:
                found.append(n)

        tvm_ffi.structural_walk(expr, [(tirx.Var, on_var), (TensorLoad, on_load), (tvm.ir.Call, on_call)])
        return bool(found)

    def analyse(self) -> None:
        """Mark varying variables and arrays until nothing changes (each pass only adds)."""
        def collect(node):
            if isinstance(node, tirx.AllocBuffer) and scope_of(node.buffer) in _PRIVATE_SCOPES:
                self.private.add(node.buffer)

        tvm_ffi.structural_walk(self.body, [(tirx.AllocBuffer, collect)])
        while True:
            before = (len(self.varying_vars), len(self.varying_arrays))
            self.visit(self.body, False)
            if (len(self.varying_vars), len(self.varying_arrays)) == before:
                return

    def visit(self, node: Any, divergent: bool) -> None:
        if isinstance(node, tirx.SeqStmt):
            for stmt in node.seq:
                self.visit(stmt, divergent)
        elif isinstance(node, tirx.AttrStmt):
            if node.attr_key == "thread_extent" and str(node.node.thread_tag).startswith("threadIdx"):
                self.varying_vars.add(node.node.var)
            self.visit(node.body, divergent)
        elif isinstance(node, tirx.For):
            if divergent or self.expr_varies(node.min) or self.expr_varies(node.extent):
                self.varying_vars.add(node.loop_var)
                divergent = True
            self.visit(node.body, divergent)
        elif isinstance(node, tirx.While):
            self.visit(node.body, divergent or self.expr_varies(node.condition))
        elif isinstance(node, tirx.IfThenElse):
            inner = divergent or self.expr_varies(node.condition)
            self.visit(node.then_case, inner)
            if node.else_case is not None:
                self.visit(node.else_case, inner)
        elif isinstance(node, tirx.Bind):
            if divergent or self.expr_varies(node.value):
                self.varying_vars.add(node.var)
        elif isinstance(node, tirx.BufferStore):
            if node.buffer in self.private and (divergent or self.expr_varies(node.value)
                                                or any(self.expr_varies(i) for i in node.indices)):
                self.varying_arrays.add(node.buffer)
        elif isinstance(node, tirx.Evaluate):
            # an extern call may write a private array through its address (e.g. a gemm's accumulator)
            def on_address(n):
                if isinstance(n.op, tvm.ir.Op) and str(n.op.name) == "tirx.address_of":
                    load = n.args[0]
                    if isinstance(load, TensorLoad) and load.source in self.private:
                        self.varying_arrays.add(load.source)

            tvm_ffi.structural_walk(node.value, [(tvm.ir.Call, on_address)])
        else:
            body = getattr(node, "body", None)
            if isinstance(body, tirx.Stmt):
                self.visit(body, divergent)


def uniform_conditions(body: Any) -> Callable[[Any], bool]:
    """Whether a branch condition of `body` is evaluated alike by all threads (the analysis runs once)."""
    analysis = _Uniformity(body)
    analysis.analyse()
    return lambda condition: not analysis.expr_varies(condition)


def marked_invariant(node: tirx.IfThenElse) -> tirx.IfThenElse:
    """The branch with its condition wrapped in `tvm_thread_invariant`."""
    return tirx.IfThenElse(tirx.call_intrin("bool", THREAD_INVARIANT, node.condition), node.then_case,
                           node.else_case)


def without_invariant_mark(node: Any) -> Any:
    """A `tvm_thread_invariant(c)` call as `c`; any other call as it is."""
    if isinstance(node.op, tvm.ir.Op) and str(node.op.name) == THREAD_INVARIANT:
        return node.args[0]
    return node


def mark_uniform_conditions(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """Wrap the condition of every `if` that all threads evaluate alike in `tvm_thread_invariant`."""
    is_uniform = uniform_conditions(func.body)

    def on_if(node, mutator):
        node = mutator.default_mutate(node)
        return marked_invariant(node) if is_uniform(node.condition) else node

    return func.with_body(tvm_ffi.structural_mutate(func.body, [(tirx.IfThenElse, on_if)]))


def unmark_uniform_conditions(func: tirx.PrimFunc) -> tirx.PrimFunc:
    def on_call(node, mutator):
        return without_invariant_mark(mutator.default_mutate(node))

    return func.with_body(tvm_ffi.structural_mutate(func.body, [(tvm.ir.Call, on_call)]))


def warp_uniform_statements(func: tirx.PrimFunc, threads: Any, wanted: Any) -> set:
    """The handles of the statements satisfying `wanted(stmt)` that every lane of a warp reaches alike: no branch
    or loop bound around them differs between threads, except conditions on the thread index itself (ranges of
    threads, which the caller checks against warp boundaries). Warp shuffles may go there."""
    analysis = _Uniformity(func.body)
    analysis.analyse()
    found: set = set()

    def visit(node: Any, divergent: bool) -> None:
        if isinstance(node, tirx.Stmt) and wanted(node):
            if not divergent:
                found.add(node.__chandle__())
            return
        if isinstance(node, tirx.SeqStmt):
            for stmt in node.seq:
                visit(stmt, divergent)
        elif isinstance(node, tirx.For):
            visit(node.body, divergent or analysis.expr_varies(node.min) or analysis.expr_varies(node.extent))
        elif isinstance(node, tirx.While):
            visit(node.body, divergent or analysis.expr_varies(node.condition))
        elif isinstance(node, tirx.IfThenElse):
            on_threads = thread_conditions(node.condition, threads)
            others = [c for c in conjuncts(node.condition) if not any(c.same_as(t) for t in on_threads)]
            then_divergent = divergent or any(analysis.expr_varies(c) for c in others)
            visit(node.then_case, then_divergent)
            if node.else_case is not None:  # `not (a and b)` mixes the two kinds
                visit(node.else_case, then_divergent or bool(on_threads and others))
        else:
            body = getattr(node, "body", None)
            if isinstance(body, tirx.Stmt):
                visit(body, divergent)

    visit(func.body, False)
    return found
