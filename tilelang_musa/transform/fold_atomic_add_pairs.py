"""FoldAtomicAddPairs: `for v in T.vectorized(2): tl::AtomicAdd(&D[i + v], X[j + v])` of float16 / bfloat16
elements becomes `tl::AtomicAddx2(&D[i], &X[j])` (a value that is not such an element, a cast of a float
accumulator's lane say, goes lane by lane: `tl::AtomicAddx2(&D[i], v0, v1)`), one 32-bit atomic of the device library (atomicAdd on half2 /
__mt_bfloat162) for the pair, as upstream's and Moore Threads' vectorizers pair 16-bit atomic adds
(docs/ATOMICS_ON_MUSA.md says which vector atomics MUSA has and why float32 stays one atomic an element).

The partitioning passes give such a nest 2-wide runs (tileop/loop_plan.py); LowerParallelLoop may give a nest over
a fragment wider ones, which fold pairwise. A run folds when D's elements move by one per lane (flat
indices, after the tensors' layouts), D's run starts at an even element (the pair is one aligned 32-bit word; the
launcher checks the tensor's address) and a condition around the add is the same in every lane. Any other
vectorized loop of atomics runs its lanes one by one (a serial loop: the wheel's VectorizeLoop does not vectorize
a call statement). Runs at the end of LowerMemory: indices are final but still N-D.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.utils import as_int, flat_index, substitute
from ..tileop.atomic import pairable_add
from .pass_base import tl_pass


def _uses(expr: Any, var: Any) -> bool:
    found = []
    tvm_ffi.structural_walk(expr, [(tirx.Var, lambda v: found.append(v) if v.same_as(var) else None)])
    return bool(found)


def _moves_by_lane(load: Any, lane: Any, start: Any, count: int) -> tuple[bool, bool]:
    """(whether the element moves by one per lane, whether its flat index at lane `start` is even)."""
    ana = tvm.sym.Analyzer()
    ana.bind(lane, tvm.ir.Range.from_min_extent(start, tirx.const(count, lane.ty.dtype)))
    flat = flat_index(load.source, list(load.indices))
    first = substitute(flat, {lane: start})
    if not ana.can_prove_equal(flat - first, lane - start):
        return False, False
    mod = ana.modular_set(ana.simplify(first))
    return True, mod.coeff % 2 == 0 and mod.base % 2 == 0


def _at_lane(load: Any, lane: Any, at: Any) -> Any:
    ana = tvm.sym.Analyzer()
    return load.source[tuple(ana.simplify(substitute(i, {lane: at})) for i in load.indices)]


def _pairs(loop: tirx.For) -> Any:
    """The loop's lanes as pair adds, or None."""
    lanes = as_int(loop.extent)
    body, guard = loop.body, None
    if isinstance(body, tirx.IfThenElse) and body.else_case is None and not _uses(body.condition, loop.loop_var):
        body, guard = body.then_case, body.condition
    found = pairable_add(body)
    if lanes is None or lanes % 2 or found is None:
        return None
    dst, value = found
    lane = loop.loop_var
    dst_moves, dst_even = _moves_by_lane(dst, lane, loop.min, lanes)
    if not (dst_moves and dst_even):
        return None
    # an element that moves with the lanes is passed by address; any other value lane by lane
    by_address = isinstance(value, tvm.ir.expr.TensorLoad) and _moves_by_lane(value, lane, loop.min, lanes)[0]
    pairs = []
    for k in range(0, lanes, 2):
        at = [loop.min + k, loop.min + k + 1]
        operands = [tirx.address_of(_at_lane(value, lane, at[0]))] if by_address else \
            [tvm.sym.Analyzer().simplify(substitute(value, {lane: a})) for a in at]
        pairs.append(tirx.Evaluate(tirx.call_extern("int32", "tl::AtomicAddx2",
                                                    tirx.address_of(_at_lane(dst, lane, at[0])), *operands)))
    stmt = pairs[0] if len(pairs) == 1 else tirx.SeqStmt(pairs)
    return stmt if guard is None else tirx.IfThenElse(guard, stmt, None)


def _calls_in_body(loop: tirx.For) -> bool:
    found = []
    tvm_ffi.structural_walk(loop.body, [(tirx.Evaluate, lambda n: found.append(n) if isinstance(
        n.value, tvm.ir.Call) and str(n.value.op.name) == "tirx.call_extern" and isinstance(
        n.value.args[0], tvm.ir.StringImm) and n.value.args[0].value.startswith("tl::Atomic") else None)])
    return bool(found)


def fold_atomic_add_pairs(func: tirx.PrimFunc) -> tirx.PrimFunc:
    def on_for(node: tirx.For, mutator: Any) -> Any:
        node = mutator.default_mutate(node)
        if not isinstance(node, tirx.For) or node.kind != tirx.ForKind.VECTORIZED or not _calls_in_body(node):
            return node
        folded = _pairs(node)
        if folded is not None:
            return folded
        return tirx.For(node.loop_var, node.min, node.extent, tirx.ForKind.SERIAL, node.body)

    body = tvm_ffi.structural_mutate(func.body, [(tirx.For, on_for)])
    return func if body.same_as(func.body) else func.with_body(body)


def FoldAtomicAddPairs():  # noqa: N802 - a pass, named as TVM names passes
    return tl_pass("FoldAtomicAddPairs", fold_atomic_add_pairs)
