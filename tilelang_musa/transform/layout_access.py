"""How a T.Parallel nest indexes a fragment, as layout inference reads it: as a map from the nest's iterations to
the fragment's elements (bijective, a box, one loop variable per dimension, or partly loop-invariant), and the
helpers those readings share."""

from __future__ import annotations

import functools
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ..ir.utils import TensorLoad, as_int, substitute
from ..layout import Fragment, Layout, LayoutError


def access_map(indices: tuple, loop_vars: list[Any], extents: list[int], shape: list[int]) -> Layout | None:
    """The access as a Layout from the loop's iteration space to the fragment's elements, if it visits each element
    exactly once (`frag[i * 8 + j]` in `T.Parallel(8, 8)` over a 64-element fragment); else None."""
    fvars = [tirx.Var(f"x{k}", "int32") for k in range(len(loop_vars))]
    exprs = [substitute(e, dict(zip(loop_vars, fvars))) for e in indices]
    try:
        index_map = Layout.from_exprs(extents, fvars, exprs)
        if [as_int(e) for e in index_map.output_shape] != shape or not index_map.is_bijective():
            return None
    except (LayoutError, KeyError, TypeError):  # not an integer map of the loop variables alone
        return None
    return index_map


def box_access(indices: tuple, loop_vars: list[Any], extents: list[int], shape: list[int]):
    """If the access is a box of the fragment (each index a constant, or one loop variable plus a constant, each
    loop variable used once, the box inside the fragment): (origin, positions) as region_plan takes them."""
    analyzer = tvm.sym.Analyzer()
    origin, positions = [], []
    for index in indices:
        used = [k for k, v in enumerate(loop_vars) if uses_var(index, v)]
        offset = as_int(analyzer.simplify(index - loop_vars[used[0]] if len(used) == 1 else index))
        if len(used) > 1 or offset is None:
            return None
        origin.append(offset)
        positions.append(used[0] if used else None)
    taken = [k for k in positions if k is not None]
    if sorted(taken) != list(range(len(loop_vars))):
        return None
    for o, k, n in zip(origin, positions, shape):
        if o < 0 or o + (1 if k is None else extents[k]) > n:
            return None
    return origin, positions


def inner_loops(body: Any) -> dict:
    """The loops inside a T.Parallel nest's body with constant bounds (`for l in T.vectorized(8)`): each runs whole
    within one iteration of the nest, on the iteration's thread. Their variable -> (min, extent)."""
    found = {}

    def on_for(node):
        lo, extent = as_int(node.min), as_int(node.extent)
        if lo is not None and extent is not None and extent > 0:
            found[node.loop_var] = (lo, extent)

    tvm_ffi.structural_walk(body, [(tirx.For, on_for)])
    return found


def uses_var(expr: Any, var: Any) -> bool:
    found = []
    tvm_ffi.structural_walk(expr, [(tirx.Var, lambda n: found.append(n) if n.same_as(var) else None)])
    return bool(found)


def compose(fragment: Fragment, outer: Layout) -> Fragment:
    """`fragment` read through `outer`: point x of outer's input lives where `fragment` puts outer(x)."""
    xs = list(outer.forward_index)
    return Fragment.from_exprs(outer.input_shape, list(outer.forward_vars),
                               fragment.thread(xs, rep=fragment.replicate_var), fragment.index(xs),
                               replicate=fragment.replicate_size, replicate_var=fragment.replicate_var)


def index_positions(indices: tuple, loop_vars: list[Any]) -> list[int] | None:
    """If every index is one of the loop variables (each at most once, in loop order), their positions."""
    positions = []
    for index in indices:
        hits = [k for k, v in enumerate(loop_vars) if isinstance(index, tirx.Var) and index.same_as(v)]
        if len(hits) != 1:
            return None
        positions.append(hits[0])
    return positions if positions == sorted(set(positions)) else None


def invariant_split(indices: tuple, loop_vars: list[Any]):
    """If every index is either a loop variable (each once, in loop order) or uses none of them, with at least one
    of each: ([(dim, loop position)], [dims indexed by a loop-invariant expression]); else None."""
    walked, fixed = [], []
    for d, index in enumerate(indices):
        hits = [k for k, v in enumerate(loop_vars) if uses_var(index, v)]
        if not hits:
            fixed.append(d)
        elif len(hits) == 1 and isinstance(index, tirx.Var):
            walked.append((d, hits[0]))
        else:
            return None
    order = [p for _, p in walked]
    if not walked or not fixed or order != sorted(set(order)):
        return None
    return walked, fixed


def invariant_terms(index: Any, loop_vars: list[Any]) -> tuple[Any, Any] | None:
    """`index` as (invariant, walked): the sum of its additive terms that use none of `loop_vars` and of those that
    do (`jj * 4 + j` -> (jj * 4, j) in a nest over j, jj a serial loop's variable outside it). None when no term is
    invariant or the invariant part is a constant (the access is then a box or a map of the loop variables)."""
    terms: list = []

    def flatten(e):
        if isinstance(e, tirx.Add):
            flatten(e.a)
            flatten(e.b)
        else:
            terms.append(e)

    flatten(index)
    fixed = [t for t in terms if not any(uses_var(t, v) for v in loop_vars)]
    walked = [t for t in terms if any(uses_var(t, v) for v in loop_vars)]
    if not fixed or not walked or all(as_int(t) is not None for t in fixed):
        return None
    total = lambda parts: functools.reduce(lambda a, b: a + b, parts)  # noqa: E731
    return total(fixed), total(walked)


def strided_split(indices: tuple, loop_vars: list[Any], extents: list[int], shape: list[int]):
    """`x[i, jj * 4 + j]` in a nest over (i, j in 4), `jj` invariant in the nest (a serial loop around it): each
    dimension indexed by one loop variable (each once, in loop order), by an invariant expression, or by an invariant
    multiple of the variable's extent plus the variable. As invariant_split's (walked, fixed) over the fragment's
    shape with each such dimension d split in two, (shape[d] / extent, extent), and that virtual shape:
    (walked, fixed, virtual shape, the dimensions split and their extents {d: extent}); None for other accesses or
    when no dimension is split."""
    analyzer = tvm.sym.Analyzer()
    virtual: list[tuple] = []
    split: dict = {}
    for d, index in enumerate(indices):
        parts = invariant_terms(index, loop_vars)
        if parts is None:
            virtual.append((shape[d], index))
            continue
        fixed, walked = parts
        hits = [k for k, v in enumerate(loop_vars) if isinstance(walked, tirx.Var) and walked.same_as(v)]
        if len(hits) != 1 or shape[d] is None or extents[hits[0]] is None:
            return None
        extent, step = extents[hits[0]], analyzer.modular_set(fixed)
        if step.coeff % extent or step.base % extent or shape[d] % extent:
            return None
        split[d] = extent
        virtual += [(shape[d] // extent, tirx.floordiv(fixed, extent)), (extent, walked)]
    if not split:
        return None
    found = invariant_split(tuple(index for _, index in virtual), loop_vars)
    if found is None:
        return None
    return found[0], found[1], [n for n, _ in virtual], split


def constant_from_zero(nest: list) -> bool:
    return all(as_int(level.extent) is not None and as_int(level.min) == 0 for level in nest)


def has_call(expr: Any) -> bool:
    found: list = []
    tvm_ffi.structural_walk(expr, [(tvm.ir.Call, found.append), (TensorLoad, found.append)])
    return bool(found)



def access_guards(body: Any, indices: tuple, loop_vars: list[Any]) -> list[Any]:
    """The conditions of the `if`s around the access with these index expressions in a T.Parallel nest's body that
    use only `loop_vars` (`if i < 16:` around `f[i + s * 16, j]`): the iterations that make the access. A condition
    on anything else is left out, so the iterations it names are a superset (checking them all stays safe)."""
    found: list = []

    def matches(node_indices) -> bool:
        return len(node_indices) == len(indices) and all(a.same_as(b) for a, b in zip(node_indices, indices))

    def visit(node: Any, conditions: list) -> bool:
        if isinstance(node, tirx.IfThenElse):
            own = [node.condition] if _uses_only(node.condition, loop_vars) else []
            return visit(node.then_case, conditions + own) or \
                (node.else_case is not None and visit(node.else_case, conditions))
        if isinstance(node, tirx.SeqStmt):
            return any(visit(stmt, conditions) for stmt in node.seq)
        hit: list = []
        tvm_ffi.structural_walk(node, [(TensorLoad, lambda n: hit.append(n) if matches(n.indices) else None),
                                       (tirx.BufferStore, lambda n: hit.append(n) if matches(n.indices) else None)])
        if hit and not isinstance(node, tirx.For):
            found.extend(conditions)
            return True
        return bool(hit) and hasattr(node, "body") and visit(node.body, conditions)

    visit(body, [])
    return found


def _uses_only(expr: Any, variables: list[Any]) -> bool:
    seen: list = []
    tvm_ffi.structural_walk(expr, [(tirx.Var, seen.append)])
    return all(any(v.same_as(w) for w in variables) for v in seen)
