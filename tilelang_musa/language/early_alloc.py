"""Kernel-scope allocations written before the kernel opens, as TVMScript-style programs write them:

    S = T.alloc_buffer((96,), "float16", scope="shared")
    for tx in T.thread_binding(8, "threadIdx.x"):
        ...

Upstream's TVMScript parser puts such an allocation at the function's root and a later pass moves it to where it is
used. Here the buffer is made when the statement runs and allocated at the top of the next kernel to open (after its
first binding, or inside `with T.Kernel`), where it would have been written. The meaning is clear only while every
use of the buffer lies in that kernel: `check_early_allocations` rejects the rest, at the allocation's line. In a
function that opens no kernel at all (IR to inspect, outside_kernel.py) the buffer is the function's own, allocated
at the top of its body (`place_without_kernel`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb
from tvm.tirx.script.builder.frame import PrimFuncFrame

from ..errors import CompileError, SourceLoc
from ..ir.outside_kernel import is_recorded
from .outside_kernel import note_outside_kernel


@dataclass
class EarlyAllocation:
    buffer: Any
    init: Any  # a T.alloc_var's initial value, stored where the buffer is allocated (or None)
    construct: str
    loc: SourceLoc | None
    placed: bool = False


def is_before_kernel(trace: Any) -> bool:
    """True at the top of a function body that has opened no kernel yet (no loop or branch around the statement)."""
    return trace.kernel is None and not trace.kernels and isinstance(IRBuilder.current().frames[-1], PrimFuncFrame)


def defer(trace: Any, construct: str, buffer: Any, init: Any = None) -> None:
    trace.early_allocations.append(EarlyAllocation(buffer, init, construct, trace.loc))


def place_early_allocations(trace: Any) -> None:
    """Called as a kernel opens, inside its launch: allocate the buffers written before it."""
    for early in trace.early_allocations:
        if early.placed:
            continue
        Tb.add_to_parent(tirx.AllocBuffer(early.buffer, {}))
        if early.init is not None:
            Tb.buffer_store(early.buffer, early.init, [0])
        early.placed = True


def place_without_kernel(func: tirx.PrimFunc, trace: Any) -> tirx.PrimFunc:
    """A function that opens no kernel (IR to inspect: outside_kernel.py) allocates the buffers written at the top
    of its body there, first, where upstream's parser puts them (the function's root); compiling it is the error.
    Every kernel that opens places the allocations before it, so only such a function has any left."""
    left = [early for early in trace.early_allocations if not early.placed]
    if not left:
        return func
    stmts = []
    for early in left:
        alloc = tirx.AllocBuffer(early.buffer, {})
        note_outside_kernel(trace, early.construct, alloc, early.loc)
        stmts.append(alloc)
        if early.init is not None:
            stmts.append(tirx.BufferStore(early.buffer, early.init, [0]))
        early.placed = True
    body = func.body
    if not (isinstance(body, tirx.Evaluate) and isinstance(body.value, tirx.IntImm) and body.value.value == 0
            and not is_recorded(body)):  # not the builder's placeholder for an empty body
        stmts.extend(body.seq if isinstance(body, tirx.SeqStmt) else [body])
    return func.with_body(tirx.SeqStmt(stmts), span=func.span)


def check_early_allocations(func: tirx.PrimFunc, trace: Any) -> None:
    if not trace.kernels:  # IR to inspect: the buffers are the function's (place_without_kernel)
        return
    for early in trace.early_allocations:
        name = early.buffer.name
        if _used_outside_its_kernel(func.body, early.buffer):
            raise CompileError(f"{early.construct}: `{name}` is allocated before the kernel's bindings, so it "
                               "belongs to the first kernel that follows; it is used outside that kernel too. "
                               "Allocate it inside the kernel that uses it", early.loc)


def _is_launch(node: Any) -> bool:
    return isinstance(node, tirx.AttrStmt) and node.attr_key == "thread_extent"


def _used_outside_its_kernel(body: Any, buffer: Any) -> bool:
    def allocates(node: Any) -> bool:
        found = []
        tvm_ffi.structural_walk(node, [(tirx.AllocBuffer, lambda a: a.buffer.same_as(buffer) and found.append(a))])
        return bool(found)

    uses = []

    def on_node(node: Any) -> Any:
        if _is_launch(node) and allocates(node):
            return tvm_ffi.WalkResult.SKIP  # the kernel it belongs to
        if isinstance(node, tvm.ir.Var) and node.same_as(buffer):
            uses.append(node)
        return None

    tvm_ffi.structural_walk(body, [(object, on_node)], order="pre")
    return bool(uses)
