"""Low-level TIR names that upstream TileLang scripts use through `T`: `T.call_extern`, `T.call_intrin`,
`T.Select`, `T.reinterpret`, `T.address_of`, `T.evaluate`, and the types `T.PrimExpr` / `T.Var`.

They build the same IR as TVMScript's; `T.call_extern("float32", "my_device_fn", x)` prints as
`my_device_fn(x)` in the MUSA C (the function must be visible to the kernel: a device template or built-in).
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.tirx.script import builder as Tb

from .builder import as_expr, current_trace
from .dtypes import canonical_dtype

PrimExpr = tvm.ir.Expr
Var = tvm.ir.expr.Var


def call_extern(dtype: Any, func_name: str, *args: Any) -> Any:
    """A call of the C function `func_name` returning `dtype` ("handle" or "void"-like "int32" for none)."""
    return tirx.call_extern(canonical_dtype(dtype), func_name, *[as_expr(a) for a in args])


def call_intrin(dtype: Any, op_name: str, *args: Any) -> Any:
    """A call of the TIR intrinsic `op_name` (e.g. "tirx.exp")."""
    return tirx.call_intrin(canonical_dtype(dtype), op_name, *[as_expr(a) for a in args])


def Select(cond: Any, true_value: Any, false_value: Any) -> Any:  # noqa: N802 - TVMScript's name
    """`cond ? true_value : false_value`, both sides evaluated (T.if_then_else evaluates one)."""
    return tirx.Select(as_expr(cond), as_expr(true_value), as_expr(false_value))


def reinterpret(dtype: Any, value: Any) -> Any:
    """The bits of `value` read as `dtype` (same width)."""
    return tirx.reinterpret(canonical_dtype(dtype), as_expr(value))


def address_of(element: Any) -> Any:
    """The address of a buffer element, `&A[i]`."""
    return tirx.address_of(element)


def evaluate(value: Any) -> None:
    """Evaluate `value` (typically a call) as a statement of the kernel."""
    trace = current_trace("T.evaluate")
    if trace.kernel is None:
        raise trace.error("`T.evaluate` must be used inside `with T.Kernel(...)`")
    Tb.evaluate(as_expr(value))
