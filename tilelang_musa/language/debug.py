"""Debugging inside kernels: `T.print` and `T.device_assert` (debug.h prints with block and thread ids)."""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.tirx.script import builder as Tb

from ..tileop.region import is_buffer
from .builder import as_expr, kernel_trace


def _str(text: str) -> Any:
    return tvm.ir.expr.StringImm(text)


def print(obj: Any = None, msg: str = "") -> None:  # noqa: A001 - the language's T.print
    """Print a value (from every thread that runs it) or every element of a buffer; with no value, `msg` alone
    (`T.print(msg="hello")`, from every thread that runs it). A shared or global buffer is printed once per block,
    by its first thread; a thread's own (`local`) buffer by every thread. Each line names the block and the
    thread."""
    trace = kernel_trace("T.print")
    if obj is None:
        Tb.evaluate(tirx.call_extern("int32", "tl::print_message", _str(msg or "T.print")))
        return
    if not is_buffer(obj):
        value = as_expr(obj)
        if not isinstance(value, tvm.ir.Expr):
            value = tirx.const(value, "float32" if isinstance(value, float) else "int32")
        Tb.evaluate(tirx.call_extern("int32", "tl::print_value", _str(msg or "T.print"), value))
        return
    scope = str(obj.ty.storage_scope)
    if scope == "local.fragment":
        raise trace.error(f"T.print: fragment `{obj.name}` is spread over the threads; copy it to a shared tile "
                          "and print that")
    shape = [int(e) for e in obj.ty.shape]
    size = 1
    for e in shape:
        size *= e
    flat = tirx.Var("flat", "int32")
    indices = []
    for k, e in enumerate(shape):
        stride = size
        for later in shape[: k + 1]:
            stride //= later
        indices.append(tirx.floormod(tirx.floordiv(flat, stride), e) if k else tirx.floordiv(flat, stride))
    element = obj[tuple(indices)]
    loop = tirx.For(flat, 0, size, tirx.ForKind.SERIAL, tirx.Evaluate(
        tirx.call_extern("int32", "tl::print_element", _str(f"{msg} " if msg else ""), _str(obj.name), flat, element)))
    if scope in ("shared", "shared.dyn", "global"):
        first = trace.kernel.thread_vars[0]
        for var in trace.kernel.thread_vars[1:]:
            first = first + var
        loop = tirx.IfThenElse(first == 0, loop, None)
    if scope in ("shared", "shared.dyn"):  # every thread's earlier writes are visible to the printing thread
        Tb.evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))
    Tb.add_to_parent(loop)


def device_assert(cond: Any, msg: str = "") -> None:
    """If `cond` is false in some thread, print `msg` with its block and thread, and fail the launch."""
    kernel_trace("T.device_assert")
    cond = as_expr(cond)
    with Tb.If(tirx.Not(cond)):
        with Tb.Then():
            Tb.evaluate(tirx.call_extern("int32", "tl::device_assert_fail", _str(msg or "T.device_assert")))
