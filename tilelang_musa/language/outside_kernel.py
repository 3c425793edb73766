"""Constructs that need a kernel, written in a function that has opened none: built as upstream builds them, so that
an IR-only `T.prim_func` (no `T.Kernel`, no thread binding) prints, compares and transforms; compiling it is the error
(ir/outside_kernel.py records each such statement at its line and rejects it when the function is compiled).

Only constructs whose IR needs nothing of the kernel take this path (`T.evaluate`, the allocations); the others keep
kernel_trace's error at their line. Once a kernel has opened, or if one opens later, the function is a kernel program
and the first such statement is rejected when the function is defined, as before.
"""

from __future__ import annotations

from typing import Any

from tvm.tirx.script import builder as Tb

from ..errors import CompileError
from ..ir.outside_kernel import kernel_required_message, record
from .builder import KernelTrace, current_trace, kernel_trace


def ir_trace(construct: str) -> tuple[KernelTrace, bool]:
    """The trace for a construct that builds plain IR, and whether it is outside every kernel (the caller then
    builds its statement with `add_outside_kernel`). Inside a kernel, kernel_trace's; after a kernel, its error."""
    trace = current_trace(construct)
    if trace.kernel is not None or trace.kernels:
        return kernel_trace(construct), False
    return trace, True


def add_outside_kernel(trace: KernelTrace, construct: str, stmt: Any) -> None:
    """Add `stmt` (built for `construct` outside every kernel) where the function body stands, and record it."""
    Tb.add_to_parent(stmt)
    note_outside_kernel(trace, construct, stmt, trace.loc)


def note_outside_kernel(trace: KernelTrace, construct: str, stmt: Any, loc: Any) -> None:
    record(stmt, construct, loc)
    trace.outside_kernel.append((construct, loc))


def record_body(func: Any, trace: KernelTrace) -> None:
    """The finished function's body stands for its first such statement: a statement can vanish from the IR
    (`T.evaluate(0)` is a no-op the builder drops), the function is no less IR-only."""
    if trace.outside_kernel and not trace.kernels:
        record(func.body, *min(trace.outside_kernel, key=lambda use: use[1].lineno if use[1] else 0))


def check_no_kernel_follows(trace: KernelTrace) -> None:
    """After the function is built: a kernel opened after a statement outside every kernel makes the function a
    kernel program, in which that statement is the error it always was."""
    if trace.kernels and trace.outside_kernel:
        construct, loc = trace.outside_kernel[0]
        raise CompileError(kernel_required_message(construct), loc)
