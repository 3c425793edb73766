"""VectorizeLoop keeping the user's lines: the wheel's VectorizeLoop (run inside this pass) rebuilds the bindings
(`y = A[i, j] * 2.0` in a T.Parallel body) and allocations of the loops it vectorizes without their source spans,
so `tl.emit_line_directives` and the simulator's reports named the enclosing loop's line for them. It keeps their
order and names: the k-th binding of `y` (allocation of `t`) after it is the k-th one before it, and each one left
without a span takes its counterpart's. A name whose count changed is left alone (no line is better than a wrong
one). Spans reach only `#line` directives and the reports' table: the MUSA C without directives is unchanged."""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.source_lines import keep_span
from .pass_base import tl_pass


def _key(stmt: Any) -> tuple[str, str]:
    return ("bind", stmt.var.name) if isinstance(stmt, tirx.Bind) else ("alloc", stmt.buffer.name)


def _named_statements(body: Any) -> dict[tuple[str, str], list[Any]]:
    found: dict[tuple[str, str], list[Any]] = {}
    tvm_ffi.structural_walk(body, [(tirx.Bind, lambda s: found.setdefault(_key(s), []).append(s)),
                                   (tirx.AllocBuffer, lambda s: found.setdefault(_key(s), []).append(s))],
                            order="pre")
    return found


def vectorize_keeping_lines(func: tirx.PrimFunc) -> tirx.PrimFunc:
    before = _named_statements(func.body)
    (vectorized,) = tirx.transform.VectorizeLoop(True)(tvm.IRModule({"main": func})).functions.values()
    after = _named_statements(vectorized.body)
    if not any(s.span is None for stmts in after.values() for s in stmts):
        return vectorized
    seen: dict[tuple[str, str], int] = {}

    def restore(stmt, mutator):
        key = _key(stmt)
        index = seen[key] = seen.get(key, -1) + 1
        old = before.get(key, [])
        if stmt.span is not None or len(old) != len(after[key]):
            return stmt
        return keep_span(old[index], stmt)

    body = tvm_ffi.structural_mutate(vectorized.body, [(tirx.Bind, restore), (tirx.AllocBuffer, restore)])
    return vectorized.with_body(body)


def VectorizeLoop():  # noqa: N802 - a pass constructor, named like TVM's
    return tl_pass("VectorizeLoop", vectorize_keeping_lines)
