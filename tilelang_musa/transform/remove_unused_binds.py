"""RemoveUnusedBinds: drop `x = value` bindings (tirx.Bind) that nothing reads any more.

StmtSimplify substitutes integer bindings into their uses (to simplify indices) but keeps the binding, which
then prints as an unused `const int x = ...;` (a warning in every compiler). Only bindings whose value calls
nothing are dropped: computing them has no effect besides the value.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.large_bindings import is_kept_value
from ..ir.utils import Var
from .pass_base import tl_body_pass


def _calls_nothing(expr: Any) -> bool:
    if is_kept_value(expr):  # KeepLargeBindings' wrapper (RestoreKeptBindings removes it later) calls nothing
        expr = expr.args[0]
    calls: list[Any] = []
    tvm_ffi.structural_walk(expr, [(tvm.ir.Call, calls.append)])
    return not calls


def remove_unused_binds(stmt: Any) -> Any:
    """`stmt` without the Binds whose variable has no other occurrence in it (and whose value calls nothing)."""
    occurrences: Counter = Counter()
    tvm_ffi.structural_walk(stmt, [(Var, lambda v: occurrences.update([v]))])

    def unused(s: Any) -> bool:
        return isinstance(s, tirx.Bind) and occurrences[s.var] == 1 and _calls_nothing(s.value)

    def on_seq(node, mutator):
        node = mutator.default_mutate(node)  # nested sequences first
        if not isinstance(node, tirx.SeqStmt):
            return node
        kept = [s for s in node.seq if not unused(s)]
        if len(kept) == len(node.seq):
            return node
        if not kept:
            return tirx.Evaluate(tirx.const(0, "int32"))
        return kept[0] if len(kept) == 1 else tirx.SeqStmt(kept)

    return tvm_ffi.structural_mutate(stmt, [(tirx.SeqStmt, on_seq)])


def RemoveUnusedBinds():  # noqa: N802
    return tl_body_pass("RemoveUnusedBinds", remove_unused_binds)
