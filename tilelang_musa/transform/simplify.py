"""`tilelang.transform.simplify`: upstream's user-facing simplification of a whole program before compiling
(`apply_simplify(func)`, `@simplify_prim_func`, and the pass `Simplify(simplify_arguments=False)` that libraries
built on TileLang, e.g. BitBLAS's schedulers, apply as `Simplify()(mod)`): TVM's statement simplifier on the
PrimFunc as written, and, as upstream's `simplify_arguments`, the tensor parameters the body never uses dropped (a
script that leaves out an optional operand, e.g. a bias, launches without it)."""

from __future__ import annotations

from typing import Callable

import tvm
import tvm_ffi
from tvm import tirx

from ..diagnostics import warn_once
from ..ir.utils import Var, is_buffer


def _without_unused_tensors(func: tirx.PrimFunc) -> tirx.PrimFunc:
    used: set = set()
    tvm_ffi.structural_walk(func.body, [(Var, lambda v: used.add(v.__chandle__()))], order="pre")
    params = [p for p in func.params if not is_buffer(p) or p.__chandle__() in used]
    if len(params) == len(func.params):
        return func
    return tirx.PrimFunc(params, func.body, ret_type=func.ret_type, attrs=func.attrs)


def _simplify_module(mod: tvm.IRModule, simplify_arguments: bool) -> tvm.IRModule:
    mod = tirx.transform.StmtSimplify()(mod)
    if not simplify_arguments:
        return mod
    return tvm.IRModule({gv: _without_unused_tensors(f) for gv, f in mod.functions.items()})


def Simplify(simplify_arguments: bool = False):  # noqa: N802 - upstream's pass name
    """A module pass: each PrimFunc simplified; with `simplify_arguments`, its unused tensor parameters dropped."""
    @tvm.transform.module_pass(opt_level=0, name="tl.Simplify")
    def simplify(mod, _ctx):
        return _simplify_module(mod, simplify_arguments)

    return simplify


def _simplify(stmt):
    mod = stmt if isinstance(stmt, tvm.IRModule) else tvm.IRModule.from_expr(stmt)
    mod = _simplify_module(mod, simplify_arguments=True)
    if isinstance(stmt, tvm.IRModule):
        return mod
    (func,) = mod.functions.values()
    return func


def apply_simplify(stmt, inline_let: bool = False):
    """`stmt` (a PrimFunc or IRModule) simplified."""
    if inline_let:
        warn_once("apply_simplify.inline_let", "apply_simplify(inline_let=True): TileLang-MUSA's simplifier "
                  "substitutes integer bindings either way and keeps the others; the flag changes nothing")
    return _simplify(stmt)


def simplify_prim_func(func: Callable) -> Callable:
    """Decorator: the PrimFunc that `func` returns, simplified."""
    def wrapper(*args, **kwargs):
        return _simplify(func(*args, **kwargs))

    return wrapper
