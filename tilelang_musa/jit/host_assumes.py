"""The `T.assume`s of a program that the launcher checks at every call (launcher/assume.py says why).

An assume is host-evaluable when every variable its condition reads is a scalar parameter or a size or stride
symbol of a tensor parameter, directly or through a binding of them (`half = N // 2`). As upstream's host code,
only assumes that hold unconditionally are checked: those at the kernel's top level or in its `with T.Kernel` body,
not under a loop or an `if` (the fact may only hold where that branch runs). The others stay compiler facts.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.source_lines import user_line
from ..launcher.assume import HostAssume, HostExpr

_BINARY = {tirx.Add: "add", tirx.Sub: "sub", tirx.Mul: "mul", tirx.FloorDiv: "floordiv", tirx.FloorMod: "floormod",
           tirx.Div: "div", tirx.Mod: "mod", tirx.Min: "min", tirx.Max: "max", tirx.EQ: "eq", tirx.NE: "ne",
           tirx.LT: "lt", tirx.LE: "le", tirx.GT: "gt", tirx.GE: "ge", tirx.And: "and", tirx.Or: "or"}
# Statements whose body runs conditionally (or per iteration): an assume there is not a fact about every call.
_CONDITIONAL = (tirx.For, tirx.While, tirx.IfThenElse)


def host_assumes(func: tirx.PrimFunc) -> tuple[HostAssume, ...]:
    """The host-evaluable, unconditional `T.assume`s of `func`, in program order."""
    host_vars = _host_vars(func)
    found: list[HostAssume] = []
    _visit(func.body, host_vars, {}, found)
    return tuple(found)


def _host_vars(func: tirx.PrimFunc) -> dict[Any, str]:
    """The variables a call binds: scalar parameters and the symbols of the tensor parameters' shapes and strides."""
    found: dict[Any, str] = {}

    def note(var: Any) -> None:
        if isinstance(var.ty, tvm.ir.PrimType):
            found[var] = var.name

    for var in func.params:
        ty = var.ty
        if isinstance(ty, tirx.BufferType):
            for dim in list(ty.shape) + list(ty.strides or []):
                tvm_ffi.structural_walk(dim, [(tvm.ir.Var, note)])
        elif isinstance(ty, tvm.ir.PrimType):
            found[var] = var.name
    return found


def _visit(stmt: Any, host_vars: dict, bindings: dict, found: list) -> None:
    if stmt is None or isinstance(stmt, _CONDITIONAL):
        return
    if isinstance(stmt, tirx.SeqStmt):
        for s in stmt.seq:
            _visit(s, host_vars, bindings, found)
        return
    if isinstance(stmt, tirx.Bind):  # in scope for the rest of its block
        bindings[stmt.var] = stmt.value
        return
    if isinstance(stmt, tirx.Evaluate):
        value = stmt.value
        if (isinstance(value, tvm.ir.Call) and isinstance(value.op, tvm.ir.Op)
                and str(value.op.name) == "tirx.assume"):
            condition = _host_expr(value.args[0], host_vars, bindings)
            if isinstance(condition, str):  # a bool parameter itself
                condition = HostExpr("bool", (condition,))
            if isinstance(condition, HostExpr):
                line = user_line(stmt.span)
                found.append(HostAssume(condition, str(value.args[0]), f"{line[0]}:{line[1]}" if line else ""))
        return
    body = getattr(stmt, "body", None)
    if isinstance(body, tirx.Stmt):
        _visit(body, host_vars, dict(bindings), found)


class _NotHost(Exception):
    """The condition reads something the host does not know at call time."""


def _host_expr(expr: Any, host_vars: dict, bindings: dict) -> Any:
    """`expr` as a HostExpr (or a constant, a symbol name), or None if it is not host-evaluable."""
    try:
        return _convert(expr, host_vars, bindings)
    except _NotHost:
        return None


def _convert(expr: Any, host_vars: dict, bindings: dict) -> Any:
    if isinstance(expr, tirx.IntImm):
        return int(expr.value)  # a bool constant too: and/or/not read it as a truth value
    if isinstance(expr, tirx.FloatImm):
        return float(expr.value)
    if isinstance(expr, tvm.ir.Var):
        if expr in host_vars:
            return host_vars[expr]
        if expr in bindings:
            return _convert(bindings[expr], host_vars, bindings)
        raise _NotHost
    op = _BINARY.get(type(expr))
    if op is not None:
        return HostExpr(op, (_convert(expr.a, host_vars, bindings), _convert(expr.b, host_vars, bindings)))
    if isinstance(expr, tirx.Not):
        return HostExpr("not", (_convert(expr.a, host_vars, bindings),))
    if isinstance(expr, tirx.Select):
        return HostExpr("select", tuple(_convert(e, host_vars, bindings)
                                        for e in (expr.condition, expr.true_value, expr.false_value)))
    if isinstance(expr, tirx.Cast):
        dtype = expr.ty.dtype
        if dtype.lanes != 1:
            raise _NotHost
        kind = "bool" if str(dtype) == "bool" else "float" if str(dtype).startswith(("float", "bfloat")) else "int"
        source = expr.value.ty.dtype
        if kind == "int" and str(source).startswith(("int", "uint")) and dtype.bits < source.bits:
            raise _NotHost  # a narrowing cast wraps: leave it to the compiler
        return HostExpr(kind, (_convert(expr.value, host_vars, bindings),))
    raise _NotHost
