"""TVMScript's explicit conditions, which upstream TileLang re-exports through `T` (TileOPs' kernels write them):

    with T.If(t < num_tiles - 1):          # also `with T.If(c), T.Then():`
        with T.Then():
            ...
        with T.Else():
            ...
    mask = T.And(row < M, col < N)         # T.Or(a, b), T.Not(a)

`T.If` builds the IfThenElse a Python `if` over a run-time condition builds (a condition known at compile time
builds one too, which the simplifier folds). `T.And` / `T.Or` / `T.Not` build the boolean expressions `and` / `or`
/ `not` build, without short-circuiting at trace time: both operands are built, as in TVMScript.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.tirx.script import builder as Tb

from .builder import _TRACES, ControlScope, as_expr, current_trace, kernel_trace, value

_OPEN_IFS: list["If"] = []  # the `with T.If(...)` statements being traced, innermost last


def _condition(construct: str, operand: Any) -> Any:
    """`operand` as a boolean expression (a Python bool becomes a constant); anything else is an error at the
    kernel's line."""
    operand = as_expr(value(operand))
    if isinstance(operand, bool):
        return tirx.const(operand, "bool")
    if isinstance(operand, tvm.ir.Expr) and str(operand.dtype) == "bool":
        return operand
    kind = f"a {operand.dtype} expression" if isinstance(operand, tvm.ir.Expr) else type(operand).__name__
    message = (f"{construct}: a condition must be a boolean (a comparison, T.And/T.Or/T.Not of them, or a Python "
               f"bool); got {kind} `{operand}`")
    raise current_trace(construct).error(message) if _TRACES else TypeError(message)


class If:
    """`with T.If(cond):` holding `with T.Then():` and optionally `with T.Else():` after it."""

    def __init__(self, cond: Any):
        self.trace = kernel_trace("T.If")
        self.cond = _condition("T.If", cond)
        self.frame = None
        self.branches: list[str] = []

    def __enter__(self) -> "If":
        self.frame = Tb.If(self.cond)
        self.frame.__enter__()
        _OPEN_IFS.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _OPEN_IFS.remove(self)
        if exc[0] is None and not self.branches:
            raise self.trace.error("`with T.If(cond):` holds no `with T.Then():`: the statements of the true branch "
                                   "go inside one")
        self.frame.__exit__(*exc)


class _Branch:
    """`with T.Then():` / `with T.Else():`, directly inside the `with T.If(...)` they belong to."""

    name = ""

    def __init__(self):
        trace = kernel_trace(f"T.{self.name}")
        owner = _OPEN_IFS[-1] if _OPEN_IFS and _OPEN_IFS[-1].trace is trace else None
        expected = [] if self.name == "Then" else ["Then"]
        if owner is None or owner.branches != expected:
            where = "after the `with T.Then():` of a `with T.If(cond):`" if self.name == "Else" else \
                "directly inside a `with T.If(cond):`, once"
            raise trace.error(f"`with T.{self.name}():` belongs {where}")
        owner.branches.append(self.name)
        self.trace, self.frame, self.scope = trace, None, ControlScope(conditional=True)

    def __enter__(self) -> None:
        self.frame = Tb.Then() if self.name == "Then" else Tb.Else()
        self.frame.__enter__()
        self.trace.scopes.append(self.scope)

    def __exit__(self, *exc: Any) -> None:
        self.trace.scopes.remove(self.scope)
        self.frame.__exit__(*exc)


class Then(_Branch):
    name = "Then"


class Else(_Branch):
    name = "Else"


def And(a: Any, b: Any) -> Any:  # noqa: N802 - TVMScript's name
    """`a and b` of two boolean expressions, both built."""
    return tirx.And(_condition("T.And", a), _condition("T.And", b))


def Or(a: Any, b: Any) -> Any:  # noqa: N802 - TVMScript's name
    """`a or b` of two boolean expressions, both built."""
    return tirx.Or(_condition("T.Or", a), _condition("T.Or", b))


def Not(a: Any) -> Any:  # noqa: N802 - TVMScript's name
    """`not a` of a boolean expression."""
    return tirx.Not(_condition("T.Not", a))
