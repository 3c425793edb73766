"""Large integer bindings: the ones the compiler keeps as bindings instead of substituting them into their uses.

A binding (`x: T.let = value`) whose value has more than LARGE_BINDING_NODES expression nodes stays a binding
where a pipelined loop replays it (transform/pipeline_units.py), and, where it is read often enough, through
TVM's simplification (transform/keep_large_bindings.py): substituted, a stream-K pair's rotation was copied into
every address. Its uses then read a variable that an analyzer knows nothing about, where the substituted value had
told it the variable's range (`by = tile % 4 // 2` lies in [0, 2): the bounds guards of the copies reading `by * 64 + i` are
proved away). `learn` gives an analyzer the variable's range and alignment back (not the value itself: binding
the value, the analyzer would substitute it into every proof, which is what made the passes slow); `teach` does
it for each large binding that some expressions read, directly or through another one's value.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from .utils import Var, expression_size

LARGE_BINDING_NODES = 16
# transform/keep_large_bindings.py wraps a large binding's value in this call while TVM's passes run: a call that
# reads state (CallEffectKind kReadState) is one TVM neither substitutes into the uses nor moves.
KEPT_BINDING_OP = "tl.kept_binding"
_READS_STATE = 2


def _register() -> None:
    try:
        tvm.ir.Op.get(KEPT_BINDING_OP)
    except Exception:  # noqa: BLE001 - not registered yet (tvm raises a generic error)
        tvm.get_global_func("ir.RegisterOp")(KEPT_BINDING_OP, "a large binding's value, kept from substitution")
        tvm.ir.Op.get(KEPT_BINDING_OP).set_attr("TCallEffectKind", _READS_STATE)


_register()


def is_kept_value(expr: Any) -> bool:
    """`expr` is a value wrapped by KeepLargeBindings."""
    return isinstance(expr, tvm.ir.Call) and isinstance(expr.op, tvm.ir.Op) and str(expr.op.name) == KEPT_BINDING_OP


def is_large(value: Any) -> bool:
    return expression_size(value) > LARGE_BINDING_NODES


def large_bindings(stmt: Any) -> dict:
    """The large bindings in `stmt`: the handle of each one's variable -> (the variable, its value), in definition
    order."""
    out: dict = {}

    def on_bind(bind):
        if is_large(bind.value):
            out[bind.var.__chandle__()] = (bind.var, bind.value)

    tvm_ffi.structural_walk(stmt, [(tirx.Bind, on_bind)], order="pre")
    return out


def as_bindings(binds: list) -> dict:
    """Bind statements (in definition order) as `large_bindings` gives them."""
    return {b.var.__chandle__(): (b.var, b.value) for b in binds}


def _reads(expr: Any) -> list:
    found: list = []
    tvm_ffi.structural_walk(expr, [(Var, lambda v: found.append(v.__chandle__()))], order="pre")
    return found


def is_integer_scalar(var: Any) -> bool:
    """Whether `var` is an integer scalar (not a vector, a float, a bool or a pointer)."""
    ty = getattr(var, "ty", None)
    return isinstance(ty, tvm.ir.PrimType) and ty.dtype.lanes == 1 and str(ty.dtype).startswith(("int", "uint"))


def learn(ana: tvm.sym.Analyzer, var: Any, value: Any) -> None:
    """`ana` knows `var`'s range and alignment as those of `value` (in what `ana` knows at this point). Only an
    integer scalar has them: a large float or pointer binding teaches nothing."""
    if not is_integer_scalar(var):
        return
    ana.update(var, ana.const_int_bound(value), override=True)
    ana.update(var, ana.modular_set(value), override=True)


def teach(ana: tvm.sym.Analyzer, exprs: list, bindings: dict) -> None:
    """`learn` each binding of `bindings` (large_bindings) that `exprs` read, directly or through another one's
    value, the ones a value reads before the value."""
    if not bindings:
        return
    pending = [h for e in exprs for h in _reads(e) if h in bindings]
    needed: set = set()
    while pending:
        handle = pending.pop()
        if handle not in needed:
            needed.add(handle)
            pending += [h for h in _reads(bindings[handle][1]) if h in bindings]
    for handle, (var, value) in bindings.items():  # definition order: a value reads earlier bindings only
        if handle in needed:
            learn(ana, var, value)
