"""KeepLargeBindings / RestoreKeptBindings: large integer bindings stay bindings through TVM's passes.

TVM's StmtSimplify substitutes every pure integer binding (`x: T.let = value`) into its uses, and the analyzers of
FlattenBuffer, RemoveNoOp and LowerIntrin see through them the same way. For a small value that is what we want
(`base = k * bk` folds into the indices); a large one read many times is copied into every use, transitively: a
stream-K pair's rotation, read through the tile's swizzled block indices by every address of every emitted
pipeline unit, made lines of 11 KB and half a minute of TVM's passes on mp_22. KeepLargeBindings wraps such a value
in `tl.kept_binding` (ir/large_bindings.py), a call that TVM's passes neither substitute nor move, though they
still simplify and lower the value inside it. RestoreKeptBindings, after LowerIntrin, unwraps it: the printer emits
`const int x = value;` and the uses read `x`.

Large: the value, with every binding it reads substituted in turn, has more than LARGE_BINDING_NODES expression
nodes, and substituting it into all its uses would add more than ADDED_NODES nodes (read once, substituting it
copies nothing). A binding inside a vectorized loop is left alone (TVM's vectorizer does not see through the
call). A kept binding hides its value from TVM's simplifier (the guards our passes left on its uses stay as they
are; ours prove what they can through ir/large_bindings.py's `learn` first), so the others, the block swizzle's
and T.Persistent's tile indices included, are substituted as before: most kernels print exactly as they did.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.large_bindings import KEPT_BINDING_OP, LARGE_BINDING_NODES, is_integer_scalar, is_kept_value
from ..ir.utils import Var, expression_size, seq, substitute
from .pass_base import tl_body_pass

# Kept where substituting the binding would add more expression nodes than this: a stream-K pair read a dozen times
# per iteration (1200), its rotation read by every pair (1000); not a T.Persistent tile index read by five
# addresses (90), nor a swizzled block index (9 nodes), which TVM's simplification still folds with the guards
# around them.
ADDED_NODES = 256


def _vectorized_bindings(stmt: Any) -> set:
    """The handles of the variables bound inside vectorized loops."""
    found: set = set()

    def on_for(loop):
        if loop.kind == tirx.ForKind.VECTORIZED:
            tvm_ffi.structural_walk(loop.body, [(tirx.Bind, lambda b: found.add(b.var.__chandle__()))])

    tvm_ffi.structural_walk(stmt, [(tirx.For, on_for)])
    return found


def large_bindings(stmt: Any) -> set:
    """The handles of the variables of the large integer bindings in `stmt` (module docstring)."""
    binds: list = []
    reads: dict = {}
    tvm_ffi.structural_walk(stmt, [(tirx.Bind, binds.append)], order="pre")
    tvm_ffi.structural_walk(stmt, [(Var, lambda v: reads.__setitem__(v.__chandle__(),
                                                                      reads.get(v.__chandle__(), 0) + 1))])
    vectorized = _vectorized_bindings(stmt)
    inlined: dict = {}  # handle -> nodes of the value with the bindings it reads substituted
    large = set()
    for bind in binds:  # in definition order: a value reads earlier bindings only
        used: list = []
        tvm_ffi.structural_walk(bind.value, [(Var, lambda v: used.append(v.__chandle__()))])
        nodes = expression_size(bind.value) + sum(inlined.get(h, 1) - 1 for h in used)
        handle = bind.var.__chandle__()
        inlined[handle] = nodes
        copies = reads.get(handle, 0) - 2  # the uses but one (reads counts the definition too)
        if nodes > LARGE_BINDING_NODES and (nodes - 1) * copies > ADDED_NODES and is_integer_scalar(bind.var) \
                and handle not in vectorized:
            large.add(handle)
            inlined[handle] = 1  # kept: a binding reading it copies the variable only
    return large


def keep_large_bindings(stmt: Any) -> Any:
    large = large_bindings(stmt)
    if not large:
        return stmt

    def on_bind(node, mutator):
        node = mutator.default_mutate(node)
        if node.var.__chandle__() not in large:
            return node
        return tirx.Bind(node.var, tirx.call_intrin(str(node.var.ty.dtype), KEPT_BINDING_OP, node.value))

    return tvm_ffi.structural_mutate(stmt, [(tirx.Bind, on_bind)])


def restore_kept_bindings(stmt: Any) -> Any:
    """`stmt` with the kept values unwrapped; one that simplified to a constant or a variable is substituted into
    its uses, as TVM would have."""
    folded: dict = {}

    def on_bind(bind):
        if is_kept_value(bind.value) and isinstance(bind.value.args[0], (tirx.IntImm, Var)):
            folded[bind.var] = bind.value.args[0]

    tvm_ffi.structural_walk(stmt, [(tirx.Bind, on_bind)])

    def on_call(node, mutator):
        node = mutator.default_mutate(node)
        return node.args[0] if is_kept_value(node) else node

    def on_seq(node, mutator):
        node = mutator.default_mutate(node)
        kept = [s for s in node.seq if not (isinstance(s, tirx.Bind) and s.var in folded)]
        return node if len(kept) == len(node.seq) else seq(kept) if kept else tirx.Evaluate(tirx.const(0, "int32"))

    stmt = tvm_ffi.structural_mutate(stmt, [(tvm.ir.Call, on_call), (tirx.SeqStmt, on_seq)])
    return substitute(stmt, folded)


def KeepLargeBindings():  # noqa: N802 - a pass, named as TVM names passes
    return tl_body_pass("KeepLargeBindings", keep_large_bindings)


def RestoreKeptBindings():  # noqa: N802
    return tl_body_pass("RestoreKeptBindings", restore_kept_bindings)
