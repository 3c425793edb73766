"""How a `T.Parallel` nest runs on the block's threads: a LoopPlan maps (thread, slot) to an iteration.

A plan is a Fragment over the nest's iteration space (iteration -> (thread, slot)) plus its inverse, which
lowering needs: every thread runs `for slot in range(local_size): x = inverse(thread, slot); body(x)`.

- The free plan (no fragment dictates one) is the coalesced, vectorized partition: fused index
  f = ((slot // V) * T + thread) * V + slot % V, so consecutive threads take consecutive V-wide pieces.
- A fragment's plan (the loop walks a fragment with a known layout) is that fragment.
- A user's plan (`T.Parallel(..., loop_layout=F)`) is F, checked against the nest (user_plan), vectorized over
  F's runs of consecutive slots that hold consecutive innermost iterations (contiguous_width).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx

_IF_THEN_ELSE = tvm.ir.Op.get("prim.if_then_else")

from ..errors import CompileError, SourceLoc
from ..ir.source_lines import user_line
from ..layout import Fragment, LayoutError
from ..ir.utils import (TensorLoad, as_int, buffer_size, collect_accesses, dtype_bytes, flat_index, scope_of,
                        substitute)
from .atomic import pairable_add
from .fragment_owner import owned_element

MAX_VECTOR_BYTES = 16  # the widest MUSA global/shared load/store (128 bits)


@dataclass(frozen=True)
class LoopPlan:
    fragment: Fragment  # iteration (in the loop's shape) -> (thread, slot)
    local_size: int
    vector_width: int  # slots [g*V, g*V + V) are V consecutive innermost iterations (vectorizable)
    inverse: Callable[[Any, Any], tuple[list[Any], Any]]  # (thread, slot) -> (iteration, in-range condition)


# Free plans by their fragment: a loop that later follows a fragment placed by a free plan reuses the plan's
# closed-form inverse (the generic inverter needs power-of-two extents for these maps).
_FREE_PLANS: dict[int, tuple[Fragment, "LoopPlan"]] = {}


def free_plan(extents: list[int], num_threads: int, width: int) -> LoopPlan:
    total = 1
    for e in extents:
        total *= e
    pieces = total // width
    iters = -(-pieces // num_threads)

    def unflatten(f):
        out, stride = [], total
        for k, e in enumerate(extents):
            stride //= e
            digit = tirx.floordiv(f, stride)
            out.append(digit if k == 0 else tirx.floormod(digit, e))  # f >= total is excluded by the guard
        return out

    def thread_and_slot(xs):
        f = flat_index_of(xs, extents)
        return tirx.floormod(tirx.floordiv(f, width), num_threads), \
            tirx.floordiv(f, width * num_threads) * width + tirx.floormod(f, width)

    fvars = [tirx.Var(f"x{k}", "int32") for k in range(len(extents))]
    thread, slot = thread_and_slot(fvars)
    fragment = Fragment.from_exprs(extents, fvars, thread, slot)

    def inverse(t, s):
        if width > 1:
            f = (tirx.floordiv(s, width) * num_threads + t) * width + tirx.floormod(s, width)
        else:
            f = s * num_threads + t
        return unflatten(f), (f < total) if pieces % num_threads else None

    plan = LoopPlan(fragment, iters * width, width, inverse)
    _FREE_PLANS[fragment.__chandle__()] = (fragment, plan)
    return plan


def row_plan(extents: list[int], num_threads: int, width: int) -> LoopPlan | None:
    """A free plan that keeps each row (the last dimension) on its own group of threads: rows over groups of
    num_threads / rows threads, a row's V-wide pieces round-robin over its group (V narrowed until they share
    them evenly). For a fragment that is reduced along its rows, whose free plan would let rows straddle thread
    groups (4 x 384 on 128 threads). None if the rows do not divide the threads or the pieces (then the free plan
    serves)."""
    rows = 1
    for e in extents[:-1]:
        rows *= e
    cols = extents[-1]
    if rows > num_threads or num_threads % rows:
        return None
    group = num_threads // rows
    # every thread of a group the same number of whole pieces (a reduction needs every slot filled)
    while width > 1 and (cols % width or (cols // width) % group):
        width //= 2
    if cols % width or (cols // width) % group:
        return None
    pieces = cols // width
    iters = pieces // group
    fvars = [tirx.Var(f"x{k}", "int32") for k in range(len(extents))]
    row = flat_index_of(fvars[:-1], extents[:-1]) if len(extents) > 1 else tirx.const(0, "int32")
    col = fvars[-1]
    thread = row * group + tirx.floormod(tirx.floordiv(col, width), group)
    slot = tirx.floordiv(col, width * group) * width + tirx.floormod(col, width)
    fragment = Fragment.from_exprs(extents, fvars, thread, slot)

    def inverse(t, s):
        r = tirx.floordiv(t, group)
        c = (tirx.floordiv(s, width) * group + tirx.floormod(t, group)) * width + tirx.floormod(s, width)
        xs, stride = [], rows
        for e in extents[:-1]:
            stride //= e
            xs.append(tirx.floormod(tirx.floordiv(r, stride), e))
        return xs + [c], None

    return LoopPlan(fragment, iters * width, width, inverse)


def line_plan(extents: list[int], num_threads: int, width: int, line_dim: int) -> LoopPlan:
    """A plan for a fragment reduced along `line_dim` whose length does not split evenly over the threads (a row of
    320 or 200 on 128 threads): each line along `line_dim` lies on a power-of-two group of G threads, its V-wide
    pieces round-robin over the group, the last round partial; the lines (the other dimensions, flattened) go
    round-robin over the num_threads / G groups, then over slots. The pairs (thread, slot) past a line's end or past
    the last line hold nothing (the inverse's condition): the reduction folds only the slots that hold an element,
    and its combine runs over the power-of-two group (upstream narrows the vector and leaves such slots empty too).
    G is at most num_threads / lines (all lines in one round where they fit) and at most the line's pieces (every
    thread of a group holds one); V is the requested width when `line_dim` is the innermost, narrowed until the
    line splits into whole pieces, at least G of them."""
    line = extents[line_dim]
    others = [d for d in range(len(extents)) if d != line_dim]
    lines = 1
    for d in others:
        lines *= extents[d]
    width = width if line_dim == len(extents) - 1 else 1
    while width > 1 and line % width:
        width //= 2
    target = 1  # the widest power-of-two group dividing the threads that leaves room for every line
    while num_threads % (target * 2) == 0 and target * 2 * lines <= num_threads:
        target *= 2
    while width > 1 and line // width < target:
        width //= 2
    group = 1
    while group * 2 <= min(target, line // width):
        group *= 2
    groups = num_threads // group
    pieces = line // width
    col_rounds = -(-pieces // group)
    row_rounds = -(-lines // groups)

    fvars = [tirx.Var(f"x{k}", "int32") for k in range(len(extents))]
    row = flat_index_of([fvars[d] for d in others], [extents[d] for d in others]) if others else \
        tirx.const(0, "int32")
    col = fvars[line_dim]
    thread = tirx.floormod(row, groups) * group + tirx.floormod(tirx.floordiv(col, width), group)
    slot = (tirx.floordiv(row, groups) * col_rounds + tirx.floordiv(col, width * group)) * width + \
        tirx.floormod(col, width)
    fragment = Fragment.from_exprs(extents, fvars, thread, slot)

    def inverse(t, s):
        r = tirx.floordiv(s, width * col_rounds) * groups + tirx.floordiv(t, group)
        c = (tirx.floormod(tirx.floordiv(s, width), col_rounds) * group + tirx.floormod(t, group)) * width + \
            tirx.floormod(s, width)
        xs: list[Any] = [None] * len(extents)
        xs[line_dim] = c
        stride = lines
        for d in others:
            stride //= extents[d]
            xs[d] = tirx.floormod(tirx.floordiv(r, stride), extents[d])
        conds = ([c < line] if pieces % group else []) + ([r < lines] if lines % groups else [])
        cond = None
        for term in conds:
            cond = term if cond is None else tirx.And(cond, term)
        return xs, cond

    return LoopPlan(fragment, row_rounds * col_rounds * width, width, inverse)


def flat_index_of(xs: list[Any], extents: list[int]) -> Any:
    f = xs[0]
    for x, e in zip(xs[1:], extents[1:]):
        f = f * e + x
    return f


def fragment_plan(fragment: Fragment, extents: list[int]) -> LoopPlan:
    """The loop runs where `fragment` (over the loop's shape) puts each iteration; replicas run it redundantly."""
    known = _FREE_PLANS.get(fragment.__chandle__())
    if known is not None and known[0].same_as(fragment):
        plan = known[1]  # keep its closed-form inverse, without the vector width (another loop's accesses)
        return LoopPlan(plan.fragment, plan.local_size, 1, plan.inverse) if plan.vector_width > 1 else plan
    local_size = as_int(fragment.local_size)

    def inverse(t, s):  # where not every (thread, slot) holds an element, only the pairs that hold one run
        return owned_element(fragment, t, s, extents)

    return LoopPlan(fragment, local_size, 1, inverse)


def check_user_layout(fragment: Any, extents: list[int], num_threads: int, where: str) -> str | None:
    """Why `fragment` cannot be the plan of a nest of `extents` run by `num_threads` threads (None if it can): it
    must be a Fragment over the extents that puts every (iteration, replica) on its own (thread, slot) of those
    threads, so that each iteration runs exactly once per replica. `where` names the threads in the message."""
    if not isinstance(fragment, Fragment):
        return f"loop_layout must be a T.Fragment; got {type(fragment).__name__}"
    shape = [as_int(e) for e in fragment.input_shape]
    if shape != list(extents):
        return (f"loop_layout {fragment!r} has input shape {shape}, but the loop's extents are {list(extents)}; "
                "a loop layout maps the loop's iteration space, so its shape must equal the extents")
    try:
        thread, slot = (a.astype(np.int64) for a in fragment.evaluate_all())
    except (LayoutError, KeyError, TypeError, ValueError) as err:
        return f"loop_layout {fragment!r} cannot be evaluated on the loop's iterations: {err}"
    local = as_int(fragment.local_size)
    if thread.size and (thread.min() < 0 or thread.max() >= num_threads):
        bad = np.argwhere((thread < 0) | (thread >= num_threads))[0]
        return (f"loop_layout {fragment!r} puts iteration {tuple(int(v) for v in bad[:-1])} (replica {int(bad[-1])}) "
                f"on thread {int(thread[tuple(bad)])}, but the loop runs on {num_threads} threads ({where})")
    if local is None or (slot.size and (slot.min() < 0 or slot.max() >= local)):
        return f"loop_layout {fragment!r} has slots outside [0, {local})"
    keys = (thread * local + slot).reshape(-1)
    order = np.argsort(keys, kind="stable")
    same = np.nonzero(keys[order][1:] == keys[order][:-1])[0]
    if same.size:
        grid_shape = thread.shape
        a, b = (np.unravel_index(order[k], grid_shape) for k in (same[0], same[0] + 1))
        what = lambda p: f"iteration {tuple(int(v) for v in p[:-1])}" + \
            (f" (replica {int(p[-1])})" if grid_shape[-1] > 1 else "")
        return (f"loop_layout {fragment!r} puts {what(a)} and {what(b)} on the same thread {int(thread[a])} and "
                f"slot {int(slot[a])}: it must cover each iteration exactly once (once per replica), each on its "
                "own (thread, slot)")
    return None


def contiguous_width(fragment: Fragment, extents: list[int]) -> int:
    """The widest power of two V such that every V-aligned run of V innermost iterations lies, in every replica,
    on one thread in V consecutive slots starting at a multiple of V: a thread's slot group [g*V, g*V + V) is
    then one vector of the innermost dimension."""
    thread, slot = fragment.evaluate_all()  # extents + [replicas]
    local = as_int(fragment.local_size)
    # A width that qualifies makes every smaller power of two qualify: try them upwards, stop at the first failure.
    width, widest = 1, extents[-1] & -extents[-1]
    while width < widest and local % (width * 2) == 0:
        wider = width * 2
        shape = list(thread.shape[:-2]) + [extents[-1] // wider, wider, thread.shape[-1]]
        t, s = thread.reshape(shape), slot.reshape(shape)
        lanes = np.arange(wider).reshape([1] * (len(shape) - 2) + [wider, 1])
        first = s[..., :1, :]
        if not ((t == t[..., :1, :]).all() and (s == first + lanes).all() and (first % wider == 0).all()):
            break
        width = wider
    return width


def user_plan(fragment: Fragment, extents: list[int], width: int, loc: Any = None, stage: str | None = None) -> LoopPlan:
    """The plan of a nest the user gave `loop_layout=fragment` (checked by check_user_layout), vectorized
    `width` wide (at most its contiguous_width)."""
    plan = fragment_plan(fragment, extents)
    try:
        plan.inverse(tirx.Var("t", "int32"), tirx.Var("s", "int32"))
    except LayoutError as err:
        raise CompileError(f"loop_layout {fragment!r} cannot be inverted (which iteration a thread runs in each "
                           f"slot): {err}", loc, stage) from None
    return LoopPlan(plan.fragment, plan.local_size, width, plan.inverse)


def region_plan(whole: LoopPlan, fragment: Fragment, origin: list[int], positions: list[int | None],
                extents: list[int]) -> LoopPlan:
    """A loop over a box of a fragment (`frag[i + 4, 3, j]` in `T.Parallel(I, J)`): it runs on the slots of the
    fragment's plan `whole`, each thread doing the slots whose element lies in the box. Element coordinate d is
    `origin[d]`, plus loop variable `positions[d]` unless that is None. `fragment` is the loop's placement
    (iteration -> (thread, slot) of the whole fragment)."""

    def inverse(t, s):
        ys, cond = whole.inverse(t, s)
        xs: list[Any] = [None] * len(extents)
        conds = [] if cond is None else [cond]
        for y, o, k in zip(ys, origin, positions):
            if k is None:
                conds.append(tirx.EQ(y, o))
            else:
                xs[k] = y - o if o else y
                conds.append(tirx.And(xs[k] >= 0, xs[k] < extents[k]))
        guard = conds[0]
        for c in conds[1:]:
            guard = tirx.And(guard, c)
        return xs, guard

    return LoopPlan(fragment, whole.local_size, 1, inverse)


def vector_width(extents: list[int], inner_var: Any, body: Any, threads_analyzer: Callable[[], Any],
                 disable: bool, cap: int | None = None, piece_invariant_loads: bool = False) -> int:
    """The widest V (16 bytes per access at most, and at most `cap` elements: the loop's coalesced_width) for
    which every global/shared access of `body` is contiguous in `inner_var`, V-aligned, and inside a V-aligned
    piece of its buffer. With `piece_invariant_loads`, a load whose index is the same for the V lanes of every
    piece (`C[col // K]` with V dividing K) is read once per piece and admitted too."""
    if not disable and pairable_add(body) is not None:
        return _atomic_pair_width(extents, inner_var, body, threads_analyzer, cap)
    if disable or _has_call_statement(body) or stores_a_lane_invariant_private(body, inner_var):
        return 1
    accesses = [a for a in collect_accesses(body) if scope_of(a.buffer) in ("global", "shared", "shared.dyn")]
    # A load that every lane shares (`kv[indices[i], d]`'s `indices[i]` with d innermost: a gathered row) is read
    # once and broadcast; the vector rule is for the accesses that move with the lanes.
    varying = lane_varying_vars(body, inner_var)
    accesses = [a for a in accesses if a.is_store or _reads_lane(a, varying)]
    if not accesses or select_of_lanes_under_a_binding(body, varying, inner_var):
        return 1
    widest = max(dtype_bytes(a.buffer.dtype) for a in accesses)
    width = max(1, MAX_VECTOR_BYTES // widest)
    if cap is not None:
        while width > cap:
            width //= 2
    while width > 1:
        if extents[-1] % width == 0 and all(
                _vectorizable(a, inner_var, width, threads_analyzer)
                or (piece_invariant_loads and not a.is_store and _piece_invariant(a, inner_var, width, threads_analyzer))
                for a in accesses):
            return width
        width //= 2
    return 1


def _atomic_pair_width(extents: list[int], inner_var: Any, body: Any, threads_analyzer: Callable[[], Any],
                       cap: int | None) -> int:
    """2 where consecutive iterations' float16 / bfloat16 atomic adds pair up (FoldAtomicAddPairs makes each pair
    one 32-bit atomic): the destination and a global or shared value contiguous and 2-aligned; else 1."""
    if extents[-1] % 2 or (cap is not None and cap < 2):
        return 1
    accesses = [a for a in collect_accesses(body) if scope_of(a.buffer) in ("global", "shared", "shared.dyn")]
    return 2 if all(_vectorizable(a, inner_var, 2, threads_analyzer) for a in accesses) else 1


def lane_varying_vars(body: Any, inner_var: Any) -> set:
    """`inner_var` and the let-bound variables of `body` whose values depend on it (directly or through another)."""
    varying = {inner_var}

    def on_bind(node):
        if _mentions(node.value, varying):
            varying.add(node.var)

    tvm_ffi.structural_walk(body, [(tirx.Bind, on_bind), (tirx.Let, on_bind)], order="pre")
    return varying


def select_of_lanes_under_a_binding(body: Any, varying: set, inner_var: Any) -> bool:
    """Whether `body` binds a lane-varying value and chooses with `T.if_then_else` on a lane-varying condition.
    The wheel's VectorizeLoop turns such a store back into a loop over lanes that reads a fresh, never-bound copy
    of the binding's variable (the kernel would not compile), so the loop stays scalar."""
    if varying == {inner_var}:
        return False
    found = []

    def on_call(call):
        if call.op.same_as(_IF_THEN_ELSE) and _mentions(call.args[0], varying):
            found.append(call)

    tvm_ffi.structural_walk(body, [(tvm.ir.Call, on_call)])
    return bool(found)


def _mentions(expr: Any, variables: set) -> bool:
    found = []
    tvm_ffi.structural_walk(expr, [(tvm.ir.expr.Var, lambda v: found.append(v) if v in variables else None)])
    return bool(found)


def _reads_lane(access: Any, varying: set) -> bool:
    return any(_mentions(index, varying) for index in access.indices)


def stores_a_lane_invariant_private(body: Any, inner_var: Any) -> bool:
    """Whether `body` stores to a thread-private element that every lane would share (`idx = i` into a
    T.alloc_var): the lanes' writes would collide and the reads after them need each lane's own value."""
    return stores_a_lane_invariant_element(body, inner_var, private_only=True)


def stores_a_lane_invariant_element(body: Any, inner_var: Any, private_only: bool = False) -> bool:
    """Whether `body` stores to an element (of any scope, or only thread-private ones) that every lane would share
    (`B[row] = B[row] + A[row, k]` in `for k in T.vectorized(K)`): each iteration reads what the one before wrote,
    which lanes running at once cannot."""
    for access in collect_accesses(body):
        if access.is_store and not (private_only and scope_of(access.buffer) in ("global", "shared", "shared.dyn")):
            index = flat_index(access.buffer, access.indices)
            if substitute(index, {inner_var: tirx.const(0, "int32")}).same_as(index):
                return True
    return False


def _has_call_statement(body: Any) -> bool:
    """Whether `body` evaluates a call for its effect (an atomic, a print, ...). Such a statement runs once per
    lane: the vectorizer would scalarize it again, and loses the lane values of the binds it reads."""
    found = []
    tvm_ffi.structural_walk(body, [(tirx.Evaluate, lambda n: found.append(n) if isinstance(n.value, tvm.ir.Call)
                                    else None)])
    return bool(found)


def hoist_lane_from_xor(expr: Any, lane: Any, width: int, ana: Any) -> Any:
    """`(base + lane) ^ b` -> `(base ^ b) + lane` when base and b are multiples of `width` (lane < width only
    touches the low bits, which b leaves alone). Swizzled shared-memory indices then stay affine in the lane,
    so the vectorizer keeps 128-bit accesses."""
    def on_xor(node, mutator):
        node = mutator.default_mutate(node)
        for x, y in ((node.a, node.b), (node.b, node.a)):
            at_zero = substitute(x, {lane: tirx.const(0, "int32")})
            if at_zero.same_as(x) or not ana.can_prove_equal(x - at_zero, lane):
                continue
            mods = [ana.modular_set(ana.simplify(e)) for e in (at_zero, y)]
            if all(m.coeff % width == 0 and m.base % width == 0 for m in mods):
                return tirx.BitwiseXor(at_zero, y) + lane
        return node

    return tvm_ffi.structural_mutate(expr, [(tirx.BitwiseXor, on_xor)])


def _vectorizable(access, inner, width: int, threads_analyzer) -> bool:
    ana = threads_analyzer()
    # a symbolic size (`T.dynamic` rows of 16 floats) counts when it is a provable multiple of V, as upstream's
    # planner has it: the layout, and so a reduction's order, does not then depend on the shape being static
    if not provably_aligned(ana.simplify(buffer_size(access.buffer)), width, ana):
        return False
    lane = tirx.Var("lane", "int32")
    group = tirx.Var("group", "int32")
    ana.bind(lane, tvm.ir.Range(0, width))
    index = flat_index(access.buffer, access.indices)
    at_lane = hoist_lane_from_xor(substitute(index, {inner: group * width + lane}), lane, width, ana)
    at_zero = substitute(at_lane, {lane: tirx.const(0, "int32")})
    if not ana.can_prove_equal(at_lane - at_zero, lane):
        return False
    return provably_aligned(ana.simplify(at_zero), width, ana)


def _piece_invariant(access, inner, width: int, threads_analyzer) -> bool:
    """The access's index is the same for every lane of each V-aligned piece of the loop."""
    ana = threads_analyzer()
    lane, group = tirx.Var("lane", "int32"), tirx.Var("group", "int32")
    ana.bind(lane, tvm.ir.Range(0, width))
    ana.bind(group, tvm.ir.Range(0, 1 << 24))
    index = flat_index(access.buffer, access.indices)
    at_lane = substitute(index, {inner: group * width + lane})
    return bool(ana.can_prove_equal(at_lane, substitute(at_lane, {lane: tirx.const(0, "int32")})))


def provably_aligned(expr: Any, width: int, ana: Any) -> bool:
    """A provable multiple of `width`; xor of two multiples (of a power of two) is one too."""
    if isinstance(expr, (tirx.BitwiseXor, tirx.Add)):
        return provably_aligned(expr.a, width, ana) and provably_aligned(expr.b, width, ana)
    mod = ana.modular_set(expr)
    return mod.coeff % width == 0 and mod.base % width == 0


def _reads(value: Any, buffer: Any) -> bool:
    found: list[Any] = []
    tvm_ffi.structural_walk(value, [(TensorLoad, lambda n: found.append(n) if n.source.same_as(buffer) else None)])
    return bool(found)


def _stores_by_one_replica(body: Any, plan: LoopPlan, loop_vars: list[Any], thread: Any) -> Any:
    """Under a replicated plan (a loop walking a fragment several threads hold, such as a reduction's result) each
    iteration runs on every replica's thread; a global or shared store that reads what it overwrites, and an atomic
    update (`T.atomic_add(G[i], t[i])`), are made by replica 0 only, so that an iteration's `G[i] += t[i]` happens
    once (it added once per replica: Megatron's sparse indexer target was 32 times too large). A plain store stays
    on every replica (the same value), and fragment stores must: each replica holds its own copy."""
    replicas = as_int(plan.fragment.replicate_size)
    if replicas is None or replicas == 1:
        return body
    owner = tirx.EQ(thread, plan.fragment.thread(loop_vars, rep=0))

    def on_store(node: Any, mutator: Any) -> Any:
        scope = scope_of(node.buffer)
        if _returns_an_atomic(node.value):
            where = user_line(node.span)
            raise CompileError(
                f"an atomic returning its previous value (`return_prev=True`), stored to `{node.buffer.name}`, in a "
                f"loop over a fragment held by {replicas} threads (a replicated fragment, such as a reduction's "
                "result): every replica would apply the update, and only one may. Take the value in a loop whose "
                "fragments are not replicated, or drop return_prev",
                SourceLoc(where[0], where[1]) if where is not None else None)
        if (scope == "global" or scope.startswith("shared")) and _reads(node.value, node.buffer):
            return tirx.IfThenElse(owner, mutator.default_mutate(node), None)
        return mutator.default_mutate(node)  # a plain store: every replica stores the same value, as upstream's

    def on_evaluate(node: Any, mutator: Any) -> Any:
        return tirx.IfThenElse(owner, node, None) if _is_atomic_update(node.value) else node

    return tvm_ffi.structural_mutate(body, [(tirx.BufferStore, on_store), (tirx.Evaluate, on_evaluate)])


def _returns_an_atomic(value: Any) -> bool:
    found: list[Any] = []
    tvm_ffi.structural_walk(value, [(tvm.ir.Call, lambda n: found.append(n) if _is_atomic_update(n) else None)])
    return bool(found)


def _is_atomic_update(call: Any) -> bool:
    """An element atomic that changes memory (`tl::AtomicAdd`, `AtomicMax`, `AtomicOr`, `AtomicAddx2`,
    `AtomicStore<..>`...; an atomic load changes nothing)."""
    if not (isinstance(call, tvm.ir.Call) and str(call.op.name) == "tirx.call_extern" and call.args
            and isinstance(call.args[0], tvm.ir.StringImm)):
        return False
    name = call.args[0].value
    return name.startswith("tl::Atomic") and not name.startswith("tl::AtomicLoad")


def lower_with_plan(loop_vars: list[Any], body: Any, plan: LoopPlan, thread: Any, num_threads: int,
                    analyzer: Any, span: Any = None) -> Any:
    """`for slot in range(local_size): x = inverse(thread, slot); [if in range:] body(x)`, vectorized over
    groups of `vector_width` slots; threads beyond the plan's threads do nothing. `span`: the T.Parallel's, given
    to the loops and guards made here (a barrier or branch error inside one names the loop's line)."""
    width = plan.vector_width
    slot_outer = tirx.Var("it", "int32")
    lane = tirx.Var("vec", "int32")
    groups = plan.local_size // width
    if width > 1:
        slot = slot_outer * width + lane if groups > 1 else lane
    else:
        slot = slot_outer if groups > 1 else tirx.const(0, "int32")
    xs, cond = plan.inverse(thread, slot)
    if width > 1:
        analyzer.bind(lane, tvm.ir.Range(0, width))
    if groups > 1:
        analyzer.bind(slot_outer, tvm.ir.Range(0, groups))
    vmap = {v: analyzer.simplify(x) for v, x in zip(loop_vars, xs)}
    stmt = substitute(_stores_by_one_replica(body, plan, loop_vars, thread), vmap)
    if width > 1:
        stmt = hoist_lane_from_xor(stmt, lane, width, analyzer)
    if cond is not None:
        if width > 1:  # the condition holds for a whole vector group or for none of it (V | extents)
            cond = substitute(cond, {lane: tirx.const(0, "int32")})
        cond = analyzer.simplify(cond)
        if not (isinstance(cond, tirx.IntImm) and int(cond.value) == 1):
            if width > 1:
                stmt = tirx.For(lane, 0, width, tirx.ForKind.VECTORIZED, stmt, span=span)
                stmt = tirx.IfThenElse(cond, stmt, None, span)
                width = 1  # already wrapped
            else:
                stmt = tirx.IfThenElse(cond, stmt, None, span)
    if width > 1:
        stmt = tirx.For(lane, 0, width, tirx.ForKind.VECTORIZED, stmt, span=span)
    if groups > 1:
        stmt = tirx.For(slot_outer, 0, groups, tirx.ForKind.SERIAL, stmt, span=span)
    plan_threads = as_int(plan.fragment.num_threads)
    if plan_threads is not None and plan_threads < num_threads:
        stmt = tirx.IfThenElse(thread < plan_threads, stmt, None, span)
    return stmt


def relayout(src, dst, tile, layouts, thread: Any, count: int, analyzer) -> Any:
    """`dst[x] = src[x]` for every element x, between two fragments of different layouts: each element is
    stored to the shared `tile` by one thread that holds it in `src`, then loaded by every thread that holds it
    in `dst`. `dst` may be the tile itself: only the stores then. The tile is the compiler's, so its barriers are
    too, whether or not the barrier passes run (TL_DISABLE_THREAD_STORAGE_SYNC leaves the user's tiles to the
    user): one before the stores (the tile's earlier readers are done) and one after them (before the loads)."""
    shape = [as_int(e) for e in src.ty.shape]
    xs = [tirx.Var(f"x{k}", "int32") for k in range(len(shape))]
    store = tirx.BufferStore(tile, src[tuple(xs)], xs)
    src_layout = layouts[src]
    if as_int(src_layout.replicate_size) != 1:  # only replica 0 stores: the tile gets one write per element
        store = tirx.IfThenElse(tirx.EQ(thread, src_layout.thread(xs, rep=0)), store, None)
    stored = lower_with_plan(xs, store, fragment_plan(src_layout, shape), thread, count, analyzer())
    sync = tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))
    if dst.same_as(tile):
        return tirx.SeqStmt([sync, stored, sync])
    load = tirx.BufferStore(dst, tile[tuple(xs)], xs)
    return tirx.SeqStmt([sync, stored, sync, lower_with_plan(xs, load, fragment_plan(layouts[dst], shape), thread,
                                                             count, analyzer())])
