"""Upstream's `tilelang.transform.simplify_prim_func` / `apply_simplify`: arithmetic simplification of a program as
the frontend built it (TVM's StmtSimplify: folds constants and index arithmetic, prunes branches it can prove).
Compiling simplifies anyway; these are for reading or comparing programs."""

from __future__ import annotations

import functools
from typing import Any, Callable

import tvm
from tvm import tirx

from ..diagnostics import warn_once


def apply_simplify(stmt: tirx.PrimFunc | tvm.IRModule, inline_let: bool = False) -> tirx.PrimFunc | tvm.IRModule:
    """`stmt` (a PrimFunc, or an IRModule of them) simplified."""
    if inline_let:
        warn_once("apply_simplify.inline_let", "apply_simplify(inline_let=True): TileLang-MUSA's simplifier keeps "
                  "let bindings; the compile substitutes them later")
    if isinstance(stmt, tvm.IRModule):
        return tirx.transform.StmtSimplify()(stmt)
    if not isinstance(stmt, tirx.PrimFunc):
        raise TypeError(f"apply_simplify expects a PrimFunc or an IRModule; got {type(stmt).__name__}")
    mod = tirx.transform.StmtSimplify()(tvm.IRModule({"main": stmt}))
    return mod["main"]


def simplify_prim_func(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: `func(...)` builds a PrimFunc; the decorated function returns it simplified."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return apply_simplify(func(*args, **kwargs))

    return wrapper
