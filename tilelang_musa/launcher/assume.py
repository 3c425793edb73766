"""The `T.assume` facts a call must satisfy, checked by the launcher once the arguments are bound.

The compiler simplifies with every `T.assume(cond)` (a guard it implies is dropped, a loop vectorized), so a call
that breaks one would compute garbage on a card. Those whose condition only reads what the host knows at call time
(scalar parameters and the size and stride symbols of the tensors) are recorded in the kernel's host metadata as a
`HostAssume` and checked before the launch, as upstream TileLang's host code does ("Assume: N % 4 == 0"); the others
(over thread or block indices, loop variables, memory) stay facts for the compiler only.

A condition is a `HostExpr` tree over symbol names: JSON-serialisable ({"op": "eq", "args": [...]}) and evaluated
with Python's integers, the unbounded arithmetic the compiler's simplifier reasons in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .spec import symbols_of

__all__ = ["AssumeViolation", "HostAssume", "HostExpr", "check_assumes", "compile_checks"]


class AssumeViolation(ValueError, RuntimeError):
    """A call breaks a host-evaluable `T.assume`. A RuntimeError as upstream's, and a ValueError as the launcher's
    other checks of argument values."""


def _truncdiv(a: Any, b: Any) -> Any:
    if isinstance(a, float) or isinstance(b, float):
        return a / b
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _truncmod(a: Any, b: Any) -> Any:
    if isinstance(a, float) or isinstance(b, float):
        return math.fmod(a, b)
    return a - b * _truncdiv(a, b)


_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "floormod": "%", "div": "/", "mod": "%",
           "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "and": "and", "or": "or"}
_ARITY = {**dict.fromkeys(["add", "sub", "mul", "floordiv", "floormod", "div", "mod", "min", "max", "eq", "ne", "lt",
                           "le", "gt", "ge", "and", "or"], 2), "not": 1, "select": 3, "int": 1, "float": 1, "bool": 1}


@dataclass(frozen=True)
class HostExpr:
    """`op` over `args`, each an int, a float, a symbol name (str) or a HostExpr. Ops: add sub mul floordiv floormod
    div mod (C's truncating / and %) min max, eq ne lt le gt ge, and or not, select (cond, then, else), and the casts
    int float bool."""

    op: str
    args: tuple

    def __post_init__(self) -> None:
        if self.op not in _ARITY:
            raise ValueError(f"HostExpr op must be one of {', '.join(_ARITY)}; got {self.op!r}")
        args = tuple(_as_operand(a) for a in self.args)
        if len(args) != _ARITY[self.op]:
            raise ValueError(f"HostExpr {self.op} takes {_ARITY[self.op]} operand(s); got {len(args)}")
        for a in args:
            if isinstance(a, bool) or not isinstance(a, (int, float, str, HostExpr)):
                raise TypeError(f"HostExpr operand must be a number, a symbol name or a HostExpr; got {a!r}")
        object.__setattr__(self, "args", args)

    def evaluate(self, values: Mapping[str, Any]) -> Any:
        """The value for the symbols' `values` (KeyError for a missing one), as the launcher computes it."""
        return _compile(self)(values)

    @property
    def symbols(self) -> tuple[str, ...]:
        return symbols_of(self.args)

    def __str__(self) -> str:
        args = [f"({a})" if isinstance(a, HostExpr) and a.op in _SYMBOL else str(a) for a in self.args]
        if self.op in _SYMBOL:
            return f" {_SYMBOL[self.op]} ".join(args)
        if self.op == "not":
            return f"not {args[0]}"
        return f"{self.op}({', '.join(args)})"


def _as_operand(value: Any) -> Any:
    """An operand as given, or read back from JSON (a HostExpr arrives as a dict)."""
    if isinstance(value, dict):
        return HostExpr(value["op"], tuple(value["args"]))
    return value


# Python spellings of the ops for `compile_checks`: `//` and `%` are TIR's floordiv and floormod.
_PYTHON = {"add": "({} + {})", "sub": "({} - {})", "mul": "({} * {})", "floordiv": "({} // {})",
           "floormod": "({} % {})", "div": "_truncdiv({}, {})", "mod": "_truncmod({}, {})", "min": "min({}, {})",
           "max": "max({}, {})", "eq": "({} == {})", "ne": "({} != {})", "lt": "({} < {})", "le": "({} <= {})",
           "gt": "({} > {})", "ge": "({} >= {})", "and": "(bool({}) and bool({}))", "or": "(bool({}) or bool({}))",
           "not": "(not {})", "select": "({1} if {0} else {2})", "int": "int({})", "float": "float({})",
           "bool": "bool({})"}


def _python(x: Any) -> str:
    """Python source computing `x` from the dict `v` of values. Safe to evaluate: ops come from _PYTHON, symbols
    are string literals (repr), constants numbers."""
    if isinstance(x, HostExpr):
        return _PYTHON[x.op].format(*[_python(a) for a in x.args])
    if isinstance(x, str):
        return f"v[{x!r}]"
    if isinstance(x, float) and not math.isfinite(x):
        return f"float({str(x)!r})"
    return repr(x)


def _compile(expr: HostExpr) -> Any:
    """`expr` as a Python function of the dict of values: several times faster at each call than walking the tree.
    `and`, `or` and `select` short-circuit; a zero divisor raises ZeroDivisionError."""
    scope = {"__builtins__": {"min": min, "max": max, "int": int, "float": float, "bool": bool},
             "_truncdiv": _truncdiv, "_truncmod": _truncmod}
    return eval(f"lambda v: {_python(expr)}", scope)  # noqa: S307 - _python builds it from checked parts only


def compile_checks(assumes: tuple["HostAssume", ...]) -> tuple[Any, ...]:
    """One function `values -> truth` per assume, which the launcher calls at every call."""
    return tuple(_compile(a.condition) for a in assumes)


@dataclass(frozen=True)
class HostAssume:
    """One `T.assume` of a kernel the host can check: its `condition`, the condition as the user's program prints
    it (`text`, named in the error as upstream does: "Assume: N % 4 == 0"), and where the user wrote it
    (`file:line`, or "" if unknown)."""

    condition: HostExpr
    text: str
    where: str = ""

    def __post_init__(self) -> None:
        condition = _as_operand(self.condition)
        if not isinstance(condition, HostExpr):
            raise TypeError(f"HostAssume.condition must be a HostExpr; got {condition!r}")
        object.__setattr__(self, "condition", condition)

    @property
    def symbols(self) -> tuple[str, ...]:
        return self.condition.symbols


def check_assumes(kernel_name: str, assumes: tuple[HostAssume, ...], checks: tuple[Any, ...],
                  values: Mapping[str, Any]) -> None:
    """Raises AssumeViolation naming the first of `assumes` (`checks`: their compile_checks) the call's `values`
    (symbols and scalar arguments) break. One whose symbols are not all bound (a tensor left out as None, which the
    kernel never touches) is not checked: nothing gives it a value."""
    for check, assume in zip(checks, assumes):
        try:
            if check(values):
                continue
            note = ""
        except KeyError:  # an unbound symbol
            continue
        except ZeroDivisionError:
            note = " (it divides by zero)"
        names = assume.symbols
        shown = ", ".join(f"{s} = {values[s]}" for s in names)
        at = f" (T.assume at {assume.where})" if assume.where else ""
        raise AssumeViolation(f"kernel '{kernel_name}': Assume: {assume.text} does not hold for this call: "
                              f"{shown}{note}{at}; the kernel was compiled using the fact, so it must hold for "
                              "every call")
