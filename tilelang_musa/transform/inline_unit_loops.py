"""InlineUnitLoops: a serial loop that runs once, `for i in T.serial(s, s + 1)`, becomes its body with `i = s`.

Stock StmtSimplify fails on such a loop when its start is not a constant (upstream issue 1728's
`T.serial(sm_id, sm_id + 1)`): it binds `i` to the start once per simplification round and rejects the second,
different-looking binding with an InternalError. The loop says nothing a substitution does not, so it goes first.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.utils import as_int, substitute
from .pass_base import tl_body_pass

_INLINED_KINDS = (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED)


def inline_unit_loops(stmt: Any) -> Any:
    analyzer = tvm.sym.Analyzer()

    def on_for(node, mutator):
        node = mutator.default_mutate(node)
        if (not isinstance(node, tirx.For) or node.kind not in _INLINED_KINDS or node.thread_binding is not None
                or dict(node.annotations) or as_int(analyzer.simplify(node.extent)) != 1):
            return node
        return substitute(node.body, {node.loop_var: node.min})

    return tvm_ffi.structural_mutate(stmt, [(tirx.For, on_for)])


def InlineUnitLoops():  # noqa: N802
    return tl_body_pass("InlineUnitLoops", inline_unit_loops)
