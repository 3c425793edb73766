"""LayoutInference: choose where every fragment's elements live, and where each loop over fragments runs.

A fragment (`T.alloc_fragment`) is a tile spread over the registers of the block's threads; its layout
(a Fragment: element -> (thread, slot)) is chosen here, in three levels:

1. fixed requirements: tile ops that dictate layouts (gemm accumulators and operands, reductions, user
   annotations) — their `infer_layout`;
2. propagation through the `T.Parallel` nests that walk fragments: a nest that reads or writes a
   fragment with a known layout runs where that fragment's elements live (iteration x on the thread that
   holds element x), and the other fragments it touches get the layout this implies (the same layout, or
   its reduction when they are indexed by a subset of the loop variables);
3. a free choice for what is still open: the coalesced, vectorized partition of the first such nest.

A nest over no fragment is planned later (PartitionParallelLoop), except under TL_DISABLE_THREAD_STORAGE_SYNC when it
reads a shared tile that an earlier nest wrote element for element: it then runs on that nest's threads
(follow_writers_without_barriers).

The pass only decides and records. The layouts go to the function attribute `tl.fragment_layouts` (read by
LowerParallelLoop, LowerFragmentAccess and the late tile ops); each nest over fragments keeps its loops and gets
the plan it runs by (tileop/loop_plan.py) on its outer loop: `parallel_loop_layout`, the plan's Fragment
(iteration -> (thread, slot)), and `tl.loop_plan`, how to rebuild the plan from it and the threads that run it.
LowerParallelLoop, right after this pass, lowers each annotated nest to a per-thread loop over slots. Two ops
that require different layouts of one fragment are an error naming the buffer, the two layouts and the
source line. A free choice keeps the rows of a fragment that is reduced along them on their own threads.

Two layouts that cannot agree (a loop runs where `acc_s_cast` lives and reads `acc_s`, which a gemm placed
elsewhere) are reconciled through shared memory rather than rejected: the loop works on a copy of the
fragment in the layout it needs, exchanged through a shared tile before it (and back after it, if the loop
writes the fragment), with a TileLangWarning naming the fragments, since it costs a round trip through
shared memory and two barriers each time the loop runs. This pass declares the copy and the tile, makes the
nest use the copy and records the exchange on the nest (`tl.layout_exchanges`); LowerParallelLoop writes it.
A T.reduce_* whose destination another op laid out otherwise than the reduction leaves its results is reconciled
the same way: it reduces into a scratch fragment in the reduced layout, relaid out to the destination through a
shared tile after it (and, with clear=False, the destination's old values to the scratch before it); this pass
writes those copies around the op (`relayout` in tileop/loop_plan.py).

Fragments live on the threads that use them. A tile op or a nest under `if`s on the thread index (a T.ws region)
runs on the contiguous range of threads those allow (thread_guard.py), and a fragment it uses is laid out over
that range: its layout's thread coordinate counts from the range's first thread (the loops and ops over it are
lowered with `thread = tid - first`). All uses of a fragment must be in one range; two are an error naming the
fragment, both ranges and both uses.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as Tb

from ..diagnostics import warn_once
from ..errors import CompileError
from ..ir.attrs import (
    ANNOTATIONS_ATTR, LAYOUTS_ATTR, LAYOUT_EXCHANGES, LOOP_PLAN, PARALLEL_LOOP_LAYOUT, REDUCERS_ATTR, VIEWS_ATTR,
)
from ..ir.pass_config import PassConfigKey, enabled
from ..ir.utils import (
    TensorLoad, Var, as_int, collect_accesses, declare_buffers, loc_of, replace_buffer, scope_of, substitute, thread_info,
)
from ..layout import Fragment, Layout, LayoutError, make_fully_replicated_fragment, reduce_fragment
from ..layout._digits import DigitError, complement, used_digits
from ..layout._expr import evaluate
from ..tileop import LayoutInferArgs, is_tile_op, parse_tile_op
from ..tileop.gemm import Gemm
from ..tileop.gemm.mma import k_major
from ..tileop.loop_plan import LoopPlan, fragment_plan, free_plan, region_plan, relayout, row_plan, vector_width
from ..tileop.reduce import Reduce
from ..tileop.region import Region
from .gemm_groups import accumulator_groups
from .partition_parallel_loop import (
    coalesced_width, collect_nest, is_parallel, nest_extents, planned_by_user, thread_analyzer,
)
from .pass_base import tl_pass
from .thread_guard import ThreadRange, map_with_guards, reaching_threads

FRAGMENT_SCOPE = "local.fragment"
EXCHANGE_SCOPE = "shared.dyn"
STAGE = "LayoutInference"


def view_buffers(func: tirx.PrimFunc) -> frozenset:
    """T.view / T.reshape views (their storage is another buffer's: no layout of their own)."""
    return frozenset(func.attrs[VIEWS_ATTR].keys()) if func.attrs is not None and VIEWS_ATTR in func.attrs \
        else frozenset()


def annotated_buffers(func: tirx.PrimFunc) -> frozenset:
    """Shared buffers stored in a user-annotated layout (a swizzle): templates that assume dense row-major
    tiles must not take them."""
    attrs = func.attrs
    if attrs is None or ANNOTATIONS_ATTR not in attrs:
        return frozenset()
    return frozenset(buf for buf, layout in attrs[ANNOTATIONS_ATTR].items() if not isinstance(layout, Fragment))


def unswizzled_tiles(func: tirx.PrimFunc) -> frozenset:
    """Shared tiles no T.gemm may store swizzled: those one gemm reads K-major and another MN-major (`dO` in an
    attention backward: B of `V @ dO^T` and of `P^T @ dO`; no single operand swizzle serves both), and, as a gemm
    reads both its shared operands one way (swizzled SQMMA, or the dense-row paths), every tile sharing a gemm
    with one of those (`q` of linear attention's `q @ k^T` when `k` is also read as `k^T @ v`)."""
    majors: dict = {}
    pairs = []

    def on_eval(node):
        if is_tile_op(node.value):
            op = parse_tile_op(node.value)
            if isinstance(op, Gemm):
                for what, region in (("A", op.A), ("B", op.B)):
                    majors.setdefault(region.buffer, set()).add(k_major(what, op))
                if scope_of(op.A.buffer) != FRAGMENT_SCOPE and scope_of(op.B.buffer) != FRAGMENT_SCOPE:
                    pairs.append((op.A.buffer, op.B.buffer))

    tvm_ffi.structural_walk(func.body, [(tirx.Evaluate, on_eval)])
    found = {buf for buf, seen in majors.items() if len(seen) > 1}
    grew = bool(found)
    while grew:
        grew = False
        for a, b in pairs:
            if (a in found) != (b in found):
                found.update((a, b))
                grew = True
    return frozenset(found)


@dataclass
class _Nest:
    loop: tirx.For
    loop_vars: list[Any]
    extents: list[int]
    body: Any
    accesses: list[tuple[Any, tuple]]  # (fragment buffer, indices)
    reach: ThreadRange  # the threads that run the nest
    plan: LoopPlan | None = None
    recipe: dict | None = None  # how LowerParallelLoop rebuilds `plan` (the `tl.loop_plan` annotation)
    source: Any = None  # the fragment whose layout the plan follows
    exchanges: dict = field(default_factory=dict)  # fragment -> _Exchange: it is relaid out around the nest
    inner: dict = field(default_factory=dict)  # loop var of a loop inside the body (serial, unrolled, vectorized) -> range

    def representative(self, indices: tuple) -> tuple:
        """`indices` with every inner loop variable at its first value (`f[i, l * 8 + t]` -> `f[i, t]`)."""
        if not self.inner:
            return tuple(indices)
        first = {v: tirx.const(lo, v.dtype) for v, (lo, _) in self.inner.items()}
        return tuple(substitute(e, first) for e in indices)

    @property
    def loc(self):
        return loc_of(self.loop)


@dataclass
class _Exchange:
    """A fragment the nest reads (or writes) in another layout: `copy` is the fragment in the nest's layout,
    `tile` the shared tile the elements pass through (`copy` is `tile` when the nest reads the tile itself)."""

    copy: Any
    tile: Any
    written: bool


def _index_map(indices: tuple, loop_vars: list[Any], extents: list[int], shape: list[int]) -> Layout | None:
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


def _box_access(indices: tuple, loop_vars: list[Any], extents: list[int], shape: list[int]):
    """If the access is a box of the fragment (each index a constant, or one loop variable plus a constant, each
    loop variable used once, the box inside the fragment): (origin, positions) as region_plan takes them."""
    analyzer = tvm.sym.Analyzer()
    origin, positions = [], []
    for index in indices:
        used = [k for k, v in enumerate(loop_vars) if _uses(index, v)]
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


def _inner_loops(body: Any) -> dict:
    """The loops inside a T.Parallel nest's body with constant bounds (`for l in T.vectorized(8)`): each runs whole
    within one iteration of the nest, on the iteration's thread. Their variable -> (min, extent)."""
    found = {}

    def on_for(node):
        lo, extent = as_int(node.min), as_int(node.extent)
        if lo is not None and extent is not None and extent > 0:
            found[node.loop_var] = (lo, extent)

    tvm_ffi.structural_walk(body, [(tirx.For, on_for)])
    return found


def _uses(expr: Any, var: Any) -> bool:
    found = []
    tvm_ffi.structural_walk(expr, [(tirx.Var, lambda n: found.append(n) if n.same_as(var) else None)])
    return bool(found)


def _compose(fragment: Fragment, outer: Layout) -> Fragment:
    """`fragment` read through `outer`: point x of outer's input lives where `fragment` puts outer(x)."""
    xs = list(outer.forward_index)
    return Fragment.from_exprs(outer.input_shape, list(outer.forward_vars),
                               fragment.thread(xs, rep=fragment.replicate_var), fragment.index(xs),
                               replicate=fragment.replicate_size, replicate_var=fragment.replicate_var)


def _index_positions(indices: tuple, loop_vars: list[Any]) -> list[int] | None:
    """If every index is one of the loop variables (each at most once, in loop order), their positions."""
    positions = []
    for index in indices:
        hits = [k for k, v in enumerate(loop_vars) if isinstance(index, tirx.Var) and index.same_as(v)]
        if len(hits) != 1:
            return None
        positions.append(hits[0])
    return positions if positions == sorted(set(positions)) else None


def _invariant_split(indices: tuple, loop_vars: list[Any]):
    """If every index is either a loop variable (each once, in loop order) or uses none of them, with at least one
    of each: ([(dim, loop position)], [dims indexed by a loop-invariant expression]); else None."""
    walked, fixed = [], []
    for d, index in enumerate(indices):
        hits = [k for k, v in enumerate(loop_vars) if _uses(index, v)]
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


class _Inference:
    def __init__(self, func: tirx.PrimFunc, configs: dict):
        self.func = func
        self.threads = thread_info(func)
        self.analyzer = thread_analyzer(self.threads)
        self.configs = configs
        self.disable_vectorize = enabled(configs, PassConfigKey.TL_DISABLE_VECTORIZE)
        self.layouts: dict[Any, Fragment] = {}
        self.origin: dict[Any, str] = {}  # buffer -> what fixed its layout (for error messages)
        self.fragments: list[Any] = []
        self.nests: list[_Nest] = []
        self.ops: list[Any] = []
        self.op_reach: list[ThreadRange] = []  # the threads that run each op
        self.op_nodes: list[Any] = []  # the Evaluate of each op, by handle
        self.reduce_exchanges: dict = {}  # Evaluate handle -> (op, scratch, tile, threads): see _exchange_reduce
        self.reach: dict[Any, tuple[ThreadRange, str]] = {}  # fragment -> its threads, and the use that set them
        self.reducers: set = set()  # T.alloc_reducer fragments
        self.rowwise: set = set()  # fragments whose free placement should keep rows apart (_reduced_along_rows)
        self.serial: list = []  # fragments accessed element-wise outside T.Parallel nests and tile ops
        self.user_barriers = enabled(configs, PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC)
        self.plain_nests: list[_Nest] = []  # T.Parallel nests over no fragment (follow_writers_without_barriers)
        self.walk_order: dict = {}  # nest loop handle -> its place in program order
        self._asked: dict[int, tuple] = {}  # op index -> which of its operands were placed when last asked

    # -- collection
    def _guards(self) -> dict:
        """The thread conditions around each T.Parallel nest and tile op, by node handle."""
        found: dict = {}

        def on_for(node, mutator, guards):
            if is_parallel(node):
                found[node.__chandle__()] = guards
                return node
            return mutator.default_mutate(node)

        def on_eval(node, mutator, guards):
            found[node.__chandle__()] = guards
            return node

        map_with_guards(self.func.body, self.threads, on_for, on_eval)
        return found

    def _reach(self, guards, node, construct: str, loc) -> ThreadRange:
        if not guards:
            return ThreadRange(0, self.threads.num_threads)
        return reaching_threads(guards, self.threads, self.analyzer(), node, STAGE, construct, loc)

    def use(self, buf, reach: ThreadRange, where: str, loc) -> None:
        """`buf` is used by `reach`'s threads: its layout is made over them, so every use must agree."""
        known = self.reach.get(buf)
        if known is None:
            self.reach[buf] = (reach, where)
        elif known[0] != reach:
            raise CompileError(
                f"fragment `{buf.name}` is used by {reach} ({where}) and by {known[0]} ({known[1]}): a fragment "
                "lives on the threads of one range and every use must run on the same threads. Use it in one "
                "T.ws region (or under one thread guard), or pass the values through shared memory", loc, STAGE)

    def threads_of(self, buf) -> ThreadRange:
        known = self.reach.get(buf)
        return known[0] if known is not None else ThreadRange(0, self.threads.num_threads)

    def collect(self) -> None:
        guards = self._guards()

        def on_alloc(node):
            if scope_of(node.buffer) == FRAGMENT_SCOPE:
                self.fragments.append(node.buffer)

        def on_for(node):
            if is_parallel(node):
                nest, body = collect_nest(node)
                accesses = [(a.buffer, a.indices) for a in collect_accesses(body) if scope_of(a.buffer) == FRAGMENT_SCOPE]
                self.walk_order[node.__chandle__()] = len(self.walk_order)
                if not accesses and self.user_barriers and _constant_from_zero(nest) and not _inner_loops(body):
                    reach = self._reach(guards.get(node.__chandle__()), node, "T.Parallel", loc_of(node))
                    self.plain_nests.append(_Nest(node, [n.loop_var for n in nest], nest_extents(nest, STAGE), body,
                                                  [], reach))
                if accesses:
                    reach = self._reach(guards.get(node.__chandle__()), node, "T.Parallel", loc_of(node))
                    loop_vars, extents = [n.loop_var for n in nest], nest_extents(nest, STAGE)
                    self.nests.append(_Nest(node, loop_vars, extents, body, accesses, reach, inner=_inner_loops(body)))
                    user = planned_by_user(node, extents, body, loop_vars[-1], reach, self.threads.num_threads,
                                           self.analyzer, self.disable_vectorize, STAGE)
                    if user is not None:  # T.Parallel(..., loop_layout=F): F is the plan, the fragments follow it
                        self.nests[-1].plan = user[0]
                        self.nests[-1].recipe = {"kind": "user", "fragment": user[0].fragment, "width": user[1]}
                    for buf, _ in accesses:
                        self.use(buf, reach, f"the T.Parallel loop at {loc_of(node)}", loc_of(node))
                return tvm_ffi.WalkResult.SKIP  # the nest's inner loops belong to it
            return None

        def on_eval(node):
            if is_tile_op(node.value):
                op = parse_tile_op(node.value)
                reach = self._reach(guards.get(node.__chandle__()), None, op.construct, op.loc)
                self.ops.append(op)
                self.op_reach.append(reach)
                self.op_nodes.append(node.__chandle__())
                for buf in self._op_buffers(op):
                    if scope_of(buf) == FRAGMENT_SCOPE:
                        self.use(buf, reach, f"{op.construct} at {op.loc}", op.loc)
                return tvm_ffi.WalkResult.SKIP  # its operands are regions, placed by the op
            return None

        def on_access(buffer):
            if scope_of(buffer) == FRAGMENT_SCOPE and buffer not in self.serial:
                self.serial.append(buffer)

        tvm_ffi.structural_walk(self.func.body, [
            (tirx.AllocBuffer, on_alloc), (tirx.For, on_for), (tirx.Evaluate, on_eval),
            (TensorLoad, lambda n: on_access(n.source)), (tirx.BufferStore, lambda n: on_access(n.buffer))],
            order="pre")

    # -- levels
    @functools.cached_property
    def _op_args(self) -> LayoutInferArgs:
        """What every tile op's inference reads; the function's walks are done once (`layouts` grows in place)."""
        return LayoutInferArgs(self.func.attrs["target"] if "target" in self.func.attrs else None,
                               self.threads.num_threads, self.layouts, self.configs, annotated_buffers(self.func),
                               view_buffers(self.func), unswizzled_tiles(self.func), accumulator_groups(self.func))

    def fix_from_ops(self) -> bool:
        """Layouts the tile ops require (or derive from what is known so far); True if any was new."""
        args = self._op_args
        changed = False
        # a reduction's destination follows its source only where no other op places it (else it is relaid out)
        for k in sorted(range(len(self.ops)), key=lambda k: isinstance(self.ops[k], Reduce)):
            op = self.ops[k]
            reach = self.op_reach[k]
            op_args = args if reach.count == args.num_threads else dataclasses.replace(args, num_threads=reach.count)
            # An op's inference reads only the layouts of its own operands: ask again only when one was placed.
            buffers = self._op_buffers(op)
            placed = tuple(buf in self.layouts for buf in buffers)
            if buffers and self._asked.get(k) == placed:
                continue
            self._asked[k] = placed
            for buf, layout in op.infer_layout(op_args, 0).items():
                changed |= buf not in self.layouts
                self.set_layout(buf, layout, f"{op.op_name} at {op.loc}", op.loc)
        return changed

    @staticmethod
    def _op_buffers(op) -> list:
        return [value.buffer for value in vars(op).values() if isinstance(value, Region)]

    def set_layout(self, buf, layout, why: str, loc) -> None:
        """Record `buf`'s layout (a Fragment for a fragment, a Layout for a shared tile)."""
        known = self.layouts.get(buf)
        if known is not None:
            if not known.is_equal(layout):
                raise CompileError(
                    f"layout conflict on `{buf.name}`: {self.origin[buf]} requires {known!r}, but {why} "
                    f"requires {layout!r}", loc, STAGE)
            return
        self.layouts[buf] = layout
        self.origin[buf] = why

    def _waiting(self) -> set:
        """Reductions' results whose source is not placed yet: the reduction will place them (reduce_fragment)."""
        return {op.dst.buffer for op in self.ops if isinstance(op, Reduce) and op.src.buffer not in self.layouts}

    def _touches(self, nest: _Nest, bufs: set) -> bool:
        return any(buf in bufs for buf, _ in nest.accesses)

    def propagate(self, defer_waiting: bool = False) -> bool:
        """Plan nests through fragments already placed, and place what planned nests imply. With defer_waiting,
        leave nests that read a reduction's pending result for later: planned now, they would place the result
        themselves, not as the reduction leaves it."""
        changed = False
        waiting = self._waiting() if defer_waiting else set()
        for nest in self.nests:
            if waiting and self._touches(nest, waiting):
                continue
            if nest.plan is None:
                for buf, indices in nest.accesses:
                    layout = self.layouts.get(buf)
                    if layout is None or (buf in self.reducers and self._reads(nest, buf)):
                        continue  # a loop that accumulates into a reducer must run each iteration once
                    if _index_positions(indices, nest.loop_vars) == list(
                            range(len(nest.loop_vars))) and self._same_shape(buf, nest.extents):
                        nest.plan, nest.source = fragment_plan(layout, nest.extents), buf
                        nest.recipe = {"kind": "fragment", "fragment": layout}
                    else:
                        through = self._plan_through(buf, layout, indices, nest)
                        if through is None:
                            continue
                        (nest.plan, nest.recipe), nest.source = through, buf
                    changed = True
                    break
            if nest.plan is None:
                continue
            for buf, indices in nest.accesses:
                if buf in self.layouts:
                    continue
                self.set_layout(buf, self._implied(buf, indices, nest), f"the T.Parallel loop at {nest.loc}",
                                nest.loc)
                changed = True
            if changed:  # let the tile ops place what this implies (a reduction's result) before the next nest
                return True
        return False

    def _plan_through(self, buf, layout: Fragment, indices, nest: _Nest) -> tuple[LoopPlan, dict] | None:
        """The nest's plan (and its recipe) when it follows `buf` (laid out as `layout`) through an access other
        than the identity: an affine map onto the whole fragment (`frag[i * 8 + j]`), or a box of it
        (`frag[i, j + 32]` over a part of the fragment); None for other accesses."""
        if nest.inner and any(_uses(e, v) for e in indices for v in nest.inner):
            # `f[i, l * 8 + t]` with `l` a loop inside the body: plan by `f[i, t]` (each inner loop at its first
            # value), kept only if the thread so chosen holds the elements of every inner iteration too
            through = self._plan_through(buf, layout, nest.representative(indices), nest)
            if through is not None:
                nest.plan, nest.recipe = through
                try:
                    if self._conflict(nest, buf, indices, layout) is not None:
                        through = None
                finally:
                    nest.plan, nest.recipe = None, None
            return through
        shape = self._shape(buf)
        index_map = _index_map(indices, nest.loop_vars, nest.extents, shape)
        if index_map is not None:
            composed = _compose(layout, index_map)
            try:  # the loop is lowered through the plan's inverse (`f[127 - i]`: no inverter handles it)
                composed.inverse()
            except LayoutError:
                return None
            return fragment_plan(composed, nest.extents), {"kind": "fragment", "fragment": composed}
        box = _box_access(indices, nest.loop_vars, nest.extents, shape)
        if box is None:
            return None
        fvars = [tirx.Var(f"x{k}", "int32") for k in range(len(nest.loop_vars))]
        exprs = [substitute(e, dict(zip(nest.loop_vars, fvars))) for e in indices]
        placement = _compose(layout, Layout.from_exprs(nest.extents, fvars, exprs))
        origin, positions = box
        recipe = {"kind": "region", "fragment": placement, "whole": layout, "shape": shape, "origin": origin,
                  "positions": [-1 if k is None else k for k in positions]}
        return region_plan(fragment_plan(layout, shape), placement, origin, positions, nest.extents), recipe

    def choose_free(self, preferred_only: bool = False) -> bool:
        # A reduction's result is placed by its source (reduce_fragment): choose the source's layout before a loop
        # (e.g. `T.copy(O, dst)`) would pick one for the result on its own that the reduction cannot produce.
        waiting = self._waiting()
        # A nest that reaches an unplaced fragment only in part (`T.copy(src, frag[0:4])` of a 64-element fragment)
        # cannot place it: a nest that walks it whole goes first and places it; the part then follows it (a box).
        open_nests = sorted((nest for nest in self.nests if nest.plan is None), key=self._reaches_part)
        preferred = [nest for nest in open_nests if not self._touches(nest, waiting)]
        for nest in preferred if preferred or preferred_only else open_nests:
            if nest.plan is None:
                if self._reaches_part(nest) and self._place_reached_parts(nest):
                    return True
                width = vector_width(nest.extents, nest.loop_vars[-1], nest.body, self.analyzer,
                                     self.disable_vectorize, coalesced_width(nest.loop))
                plan = None
                if any((buf in self.rowwise and self._walks_whole(buf, indices, nest))
                       or self._reads_row_values(buf, indices, nest) for buf, indices in nest.accesses):
                    plan = row_plan(nest.extents, nest.reach.count, width)
                nest.plan = plan or free_plan(nest.extents, nest.reach.count, width)
                nest.recipe = {"kind": "row" if plan else "free", "width": width}
                return True
        return False

    def _reaches_part(self, nest: _Nest) -> bool:
        """The nest reaches a fragment not placed yet in fewer iterations than the fragment has elements."""
        iterations = int(np.prod(nest.extents))
        for buf, indices in nest.accesses:
            if buf in self.layouts or buf not in self.fragments:
                continue
            shape = self._shape(buf)
            if None not in shape and iterations < int(np.prod(shape)):
                return True
        return False

    def _reads_row_values(self, buf, indices, nest: _Nest) -> bool:
        """`buf[i]` in a nest over (i, j): a per-row value (a row reduction's result) with a known layout."""
        positions = _index_positions(indices, nest.loop_vars)
        return buf in self.layouts and positions is not None and 0 < len(positions) < len(nest.loop_vars) and \
            positions == list(range(len(positions)))

    @staticmethod
    def _reads(nest: _Nest, buf) -> bool:
        return any(not a.is_store and a.buffer.same_as(buf) for a in collect_accesses(nest.body))

    @staticmethod
    def _writes(nest: _Nest, buf) -> bool:
        return any(a.is_store and a.buffer.same_as(buf) for a in collect_accesses(nest.body))

    def _walks_whole(self, buf, indices, nest: _Nest) -> bool:
        return _index_positions(indices, nest.loop_vars) == list(range(len(nest.loop_vars))) and \
            self._same_shape(buf, nest.extents)

    def _reduced_along_rows(self) -> set:
        """Fragments reduced along their last dimension by a T.reduce_*, and those sharing their layout with one
        through a T.Parallel nest that walks both whole: their layout should keep rows apart (row_plan)."""
        found = {op.src.buffer for op in self.ops
                 if isinstance(op, Reduce) and op.dim == len(self._shape(op.src.buffer)) - 1}
        changed = True
        while changed:
            changed = False
            for nest in self.nests:
                whole = [buf for buf, indices in nest.accesses if self._walks_whole(buf, indices, nest)]
                if any(buf in found for buf in whole) and not all(buf in found for buf in whole):
                    found.update(whole)
                    changed = True
        return found

    def _same_shape(self, buf, extents) -> bool:
        return self._shape(buf) == list(extents)

    @staticmethod
    def _shape(buf) -> list:
        return [as_int(e) for e in buf.ty.shape]

    def _implied(self, buf, indices, nest: _Nest) -> Fragment:
        positions = _index_positions(indices, nest.loop_vars)
        shape = self._shape(buf)
        if not any(_uses(e, v) for e in indices for v in nest.loop_vars) and not self._writes(nest, buf):
            # `s[0]` read by every iteration (a reduction's result broadcast): every thread of the nest holds it
            return make_fully_replicated_fragment(shape, nest.reach.count)
        if positions is None:
            index_map = _index_map(indices, nest.loop_vars, nest.extents, shape)
            if index_map is not None:  # each element visited once: it lives where its iteration runs
                try:
                    return _compose(nest.plan.fragment, index_map.inverse())
                except LayoutError:
                    pass
        if positions is None:
            shared = self._read_by_several(buf, indices, nest, shape)
            if shared is not None:
                return shared
        if positions is None:
            split = _invariant_split(indices, nest.loop_vars)
            if split is not None and [nest.extents[p] for _, p in split[0]] == [shape[d] for d, _ in split[0]]:
                return self._held_along(buf, split, nest)
        alike = self._boxed_like_source(buf, indices, nest)
        if alike is not None:
            return alike
        if positions is None or [nest.extents[p] for p in positions] != shape:
            raise CompileError(
                f"cannot infer the layout of fragment `{buf.name}` from its access `{buf.name}[{', '.join(map(str, indices))}]`"
                f" in this loop: a fragment in T.Parallel must be indexed by the loop variables", nest.loc, STAGE)
        layout = nest.plan.fragment
        try:
            for dim in reversed([d for d in range(len(nest.loop_vars)) if d not in positions]):
                layout = reduce_fragment(layout, dim)
        except LayoutError as err:
            raise CompileError(f"cannot place fragment `{buf.name}`: {err}", nest.loc, STAGE) from None
        return layout

    def _boxed_like_source(self, buf, indices, nest: _Nest) -> Fragment | None:
        """`l[i]` in a nest over the first rows `i < 4` of `m` and `l`, both of 16 rows, the nest planned through
        its box of `m`: `l` takes `m`'s layout whole, so that the box it reaches sits where `m`'s does. None
        unless the nest follows a box of a fragment of `buf`'s shape indexed exactly as `buf` is here."""
        source = nest.source
        if nest.recipe is None or nest.recipe.get("kind") != "region" or source is None or \
                self._shape(source) != self._shape(buf):
            return None
        for other, other_indices in nest.accesses:
            if other.same_as(source) and len(other_indices) == len(indices) and \
                    all(tvm_ffi.structural_equal(a, b) for a, b in zip(other_indices, indices)):
                return self.layouts[source]
        return None

    def _place_reached_parts(self, nest: _Nest) -> bool:
        """Give each fragment not placed yet that `nest` reaches only in part (a box: `l[i]` for `i < 4` of 16 rows)
        the layout a nest walking it whole would get, so that `nest` can then follow that box; True if any was
        placed. Used once every open nest reaches a fragment in part: nothing will walk it whole."""
        placed = False
        for buf, indices in nest.accesses:
            shape = self._shape(buf)
            if buf in self.layouts or buf not in self.fragments or None in shape or \
                    _box_access(indices, nest.loop_vars, nest.extents, shape) is None or \
                    self._same_shape(buf, nest.extents):
                continue
            plan = free_plan(shape, nest.reach.count, 1)
            self.set_layout(buf, plan.fragment, f"the whole-fragment plan of `{buf.name}`, which T.Parallel loops "
                            f"reach only in part (the first at {nest.loc})", nest.loc)
            placed = True
        return placed

    def _read_by_several(self, buf, indices, nest: _Nest, shape: list) -> Fragment | None:
        """`buf[i, j // 8]` read in a nest over (i, j): each element is read by several iterations (those differing
        only in the digits of the loop variables the index ignores, here j % 8). With those digits as one more
        coordinate the access is a bijection; the element lives with every thread that runs one of its iterations
        (the extra coordinate reduced away as a reduction's is). None for other accesses (upstream's
        CompleteBufferFragment)."""
        if self._writes(nest, buf) or None in shape or None in nest.extents:
            return None
        flat = indices[0]
        for extent, index in zip(shape[1:], indices[1:]):
            flat = flat * extent + index
        dom = dict(zip(nest.loop_vars, nest.extents))
        rep, count = tirx.const(0, "int32"), 1
        try:
            for var, extent in zip(nest.loop_vars, nest.extents):
                for digit in complement(used_digits(flat, var, dom), extent):
                    rep, count = rep + digit.of(var, extent) * count, count * digit.extent
        except (DigitError, LayoutError, KeyError, TypeError):
            return None
        if count == 1:
            return None
        index_map = _index_map(tuple(indices) + (rep,), nest.loop_vars, nest.extents, shape + [count])
        if index_map is None:
            return None
        try:
            return reduce_fragment(_compose(nest.plan.fragment, index_map.inverse()), len(shape))
        except LayoutError:
            return None

    def _held_along(self, buf, split, nest: _Nest) -> Fragment:
        """`buf[k, i]` in a nest over i, k fixed in the nest (a serial loop's variable): the thread running
        iteration i holds every `buf[*, i]`, the dimensions indexed by k kept in its own slots."""
        walked, fixed = split
        layout = nest.plan.fragment
        used = [p for _, p in walked]
        try:
            for dim in reversed([d for d in range(len(nest.loop_vars)) if d not in used]):
                layout = reduce_fragment(layout, dim)
        except LayoutError as err:
            raise CompileError(f"cannot place fragment `{buf.name}`: {err}", nest.loc, STAGE) from None
        shape = self._shape(buf)
        fvars = [tirx.Var(f"x{d}", "int32") for d in range(len(shape))]
        outer = [fvars[d] for d, _ in walked]
        slot, stride = 0, 1
        for d in reversed(fixed):
            slot, stride = slot + fvars[d] * stride, stride * shape[d]
        return Fragment.from_exprs(shape, fvars, layout.thread(outer, rep=layout.replicate_var),
                                   layout.index(outer) * stride + slot, replicate=layout.replicate_size,
                                   replicate_var=layout.replicate_var)

    # -- checks
    def _check_replicated_writes(self, nest: _Nest) -> None:
        """A store to a replicated fragment from a nest some of whose variables its index does not use (`out[t, k] =
        x[t, e]` under `if e == best[t]`, in a nest over (t, e)): each replica is written by the iterations its
        thread runs, so where the value or a condition around the store depends on those variables the replicas
        would disagree. Refused: nothing defines which iteration's value every thread should hold."""
        conditions: list = []

        def visit(node: Any) -> None:
            if isinstance(node, tirx.IfThenElse):
                conditions.append(node.condition)
                visit(node.then_case)
                conditions.pop()
                if node.else_case is not None:
                    conditions.append(node.condition)
                    visit(node.else_case)
                    conditions.pop()
            elif isinstance(node, tirx.BufferStore):
                buf = node.buffer
                layout = self.layouts.get(buf)
                if scope_of(buf) != FRAGMENT_SCOPE or layout is None or layout.replicate_size <= 1 \
                        or buf in self.reducers:
                    return
                missing = [v for v in nest.loop_vars if not any(_uses(i, v) for i in node.indices)]
                deciding = [node.value, *conditions]
                varying = [v for v in missing if any(_uses(e, v) for e in deciding)]
                if varying:
                    names = ", ".join(f"`{v.name}`" for v in varying)
                    raise CompileError(
                        f"fragment `{buf.name}` is written as `{buf.name}[{', '.join(map(str, node.indices))}]` by "
                        f"every value of {names} of this T.Parallel loop, with a value (or under a condition) that "
                        f"depends on {names}; its copies on the threads that run those iterations would differ. "
                        f"Reduce along {names} first (T.reduce_* into a fragment indexed without it), or write it "
                        f"from a loop over its own indices", nest.loc, STAGE)
            elif isinstance(node, tirx.SeqStmt):
                for stmt in node.seq:
                    visit(stmt)
            elif hasattr(node, "body"):
                visit(node.body)

        visit(nest.body)

    def check(self) -> None:
        for nest in self.nests:
            self._check_replicated_writes(nest)
        for frag in self.fragments:
            if frag not in self.layouts:
                # never walked by a loop nor placed by an op: one element per thread slot, replicated nowhere
                shape = [as_int(e) for e in frag.ty.shape]
                if any(e is None for e in shape):
                    raise CompileError(f"fragment `{frag.name}` must have a constant shape", stage=STAGE)
                self.layouts[frag] = free_plan(shape, self.threads_of(frag).count, 1).fragment
                self.origin[frag] = "default placement"
        for nest in self.nests:
            for buf, indices in nest.accesses:
                if buf is nest.source or buf in nest.exchanges:
                    continue
                conflict = self._conflict(nest, buf, indices)
                if conflict is not None:
                    self._exchange(nest, buf, conflict)
        for k, op in enumerate(self.ops):
            if isinstance(op, Reduce) and op.src.buffer in self.layouts and op.dst.buffer in self.layouts \
                    and scope_of(op.dst.buffer) == FRAGMENT_SCOPE:
                reduced = reduce_fragment(self.layouts[op.src.buffer], op.dim)  # its infer_layout checked this
                if not self.layouts[op.dst.buffer].is_equal(reduced):
                    self._exchange_reduce(k, op, reduced)

    def _exchange_reduce(self, k: int, op: Reduce, reduced: Fragment) -> None:
        """The reduction `op` writes a scratch fragment laid out as `reduced`, relaid out to its destination (laid
        out otherwise by another op) through a shared tile."""
        dst = op.dst.buffer
        shape = self._shape(dst)
        why = (f"T.reduce_{op.kind} at {op.loc} leaves its results as {reduced!r}, but `{dst.name}` is laid out as "
               f"{self.layouts[dst]!r} ({self.origin.get(dst)})")
        if [as_int(m) for m in op.dst.mins] != [0] * len(shape) or [as_int(e) for e in op.dst.extents] != shape:
            raise CompileError(f"layout conflict: {why}; reduce into a whole fragment", op.loc, STAGE)
        dtype = str(dst.ty.dtype.dtype)
        scratch = Tb.buffer(shape, dtype, scope=FRAGMENT_SCOPE)
        IRBuilder.name(f"{dst.name}_reduced", scratch)
        tile = Tb.buffer(shape, dtype, scope=EXCHANGE_SCOPE)
        IRBuilder.name(f"{dst.name}_exchange", tile)
        self.layouts[scratch] = reduced
        self.origin[scratch] = f"T.reduce_{op.kind} at {op.loc}"
        self.fragments.append(scratch)
        self.reduce_exchanges[self.op_nodes[k]] = (op, scratch, tile, self.op_reach[k])
        nbytes = int(np.prod(shape)) * tvm.runtime.DataType(dtype).bits // 8
        warn_once(f"reduce exchange at {op.loc}: {why}",
                  f"{op.loc}: the result of T.reduce_{op.kind} reaches `{dst.name}` through a {nbytes}-byte "
                  f"shared-memory tile{'' if op.clear else ' (and its old values come the other way first)'}, each "
                  f"time it runs, because {why}. Reducing into a fragment of its own avoids the exchange.")

    def _conflict(self, nest: _Nest, buf, indices, layout: Fragment | None = None) -> str | None:
        """Why an iteration of the nest would touch an element of `buf` its thread does not hold (None if
        none would)."""
        layout = layout if layout is not None else self.layouts[buf]
        loop_thread, _ = nest.plan.fragment.evaluate_all()  # shape: extents + [replicas]
        frag_thread, _ = layout.evaluate_all()
        # the iterations, and within each the values of the loops inside the body (the iteration's thread runs them)
        points = np.indices(list(loop_thread.shape[:-1]) + [extent for _, extent in nest.inner.values()])
        loop_thread = loop_thread.reshape(loop_thread.shape[:-1] + (1,) * len(nest.inner) + loop_thread.shape[-1:])
        shape = self._shape(buf)
        # an index the nest holds fixed (a serial loop's `k`) may take any value: check every element it reaches
        walked = list(nest.loop_vars) + list(nest.inner)
        fixed = [d for d, e in enumerate(indices) if as_int(e) is None and not any(_uses(e, v) for v in walked)]
        for values in itertools.product(*[range(shape[d]) for d in fixed]):
            chosen = list(indices)
            for d, value in zip(fixed, values):
                chosen[d] = tirx.IntImm("int32", value)
            conflict = self._conflict_at(nest, buf, chosen, layout, loop_thread, frag_thread, points, shape)
            if conflict is not None:
                return conflict
        return None

    def _conflict_at(self, nest, buf, indices, layout, loop_thread, frag_thread, points, shape) -> str | None:
        try:  # the fragment element each iteration touches
            env = {v: points[k] for k, v in enumerate(nest.loop_vars)}
            for k, (v, (lo, _)) in enumerate(nest.inner.items(), start=len(nest.loop_vars)):
                env[v] = points[k] + lo
            key = tuple(np.broadcast_to(evaluate(e, env), points.shape[1:]) for e in indices)
        except (KeyError, TypeError, ValueError):
            key = None
        if key is None or any(((k < 0) | (k >= n)).any() for k, n in zip(key, shape)):
            raise CompileError(
                f"fragment `{buf.name}` is accessed as `{buf.name}[{', '.join(map(str, indices))}]` in a T.Parallel "
                "loop; index a fragment with integer expressions of the loop variables (and of constant-bound loops inside "
                "its body) that stay inside it",
                nest.loc, STAGE)
        for rep in range(loop_thread.shape[-1]):
            owners = loop_thread[..., rep]
            held = frag_thread[key]  # (... , fragment replicas)
            if not np.all((held == owners[..., None]).any(axis=-1)):
                runs = f"where `{nest.source.name}` lives" if nest.source is not None else \
                    "by its loop_layout" if nest.recipe["kind"] == "user" else "on its own partition"
                return (f"the T.Parallel loop runs {runs} ({nest.plan.fragment!r}), but fragment `{buf.name}` is "
                        f"laid out as {layout!r} ({self.origin.get(buf)}): an iteration would touch an element "
                        "another thread holds")
        return None

    def _exchange(self, nest: _Nest, buf, conflict: str) -> None:
        """Give the nest a copy of `buf` in the layout it needs, exchanged through shared memory. A fragment the
        nest only reads, with an index no register layout can serve (`A[i, j // 32]`: one element for several
        threads' iterations), is read from the shared tile itself."""
        accesses = [indices for b, indices in nest.accesses if b is buf]
        written = any(a.is_store and a.buffer.same_as(buf) for a in collect_accesses(nest.body))
        try:
            needed = self._implied(buf, accesses[0], nest)
            if any(self._conflict(nest, buf, indices, needed) is not None for indices in accesses):
                needed = None
        except CompileError:
            needed = None
        if needed is None and written:
            raise CompileError(f"layout conflict: {conflict}", nest.loc, STAGE)
        shape, dtype = self._shape(buf), str(buf.ty.dtype.dtype)
        tile = Tb.buffer(shape, dtype, scope=EXCHANGE_SCOPE)
        IRBuilder.name(f"{buf.name}_exchange", tile)
        if needed is None:
            copy = tile
        else:
            copy = Tb.buffer(shape, dtype, scope=FRAGMENT_SCOPE)
            IRBuilder.name(f"{buf.name}_relaid", copy)
            self.layouts[copy] = needed
            self.origin[copy] = f"the T.Parallel loop at {nest.loc}"
            self.fragments.append(copy)
        nest.exchanges[buf] = _Exchange(copy, tile, written)
        nbytes = int(np.prod(shape)) * tvm.runtime.DataType(dtype).bits // 8
        how = ("read from a" if copy is tile else "exchanged through a") + f" {nbytes}-byte shared-memory tile " + \
            ("in" if copy is tile else "around" if written else "before")
        warn_once(f"layout exchange at {nest.loc}: {conflict}",
                  f"{nest.loc}: fragment `{buf.name}` is {how} this T.Parallel loop, each time it runs, because "
                  f"{conflict}. Where the two layouts come from different gemm instructions or warp policies, making "
                  "them agree avoids the exchange.")

    def fix_reducers(self) -> None:
        """A reducer (T.alloc_reducer) is held whole by every thread: each adds its own iterations to its copy."""
        attrs = self.func.attrs
        for buf in (attrs[REDUCERS_ATTR].keys() if attrs is not None and REDUCERS_ATTR in attrs else ()):
            self.reducers.add(buf)
            self.set_layout(buf, make_fully_replicated_fragment([as_int(e) for e in buf.ty.shape],
                                                                 self.threads_of(buf).count), "T.alloc_reducer", None)

    @functools.cached_property
    def _gemm_accumulators(self) -> set:
        return {op.C.buffer for op in self.ops if isinstance(op, Gemm)}

    def fix_serial_accesses(self) -> None:
        """A fragment read or written element by element outside T.Parallel (`a = f[i]` in a serial loop run by
        every thread) must be held whole by every thread, as a reducer is: any thread may read any element.
        A gemm's accumulator keeps the gemm's layout instead: its element accesses must each touch an element the
        accessing thread holds (check_owned_accesses), as hand-written epilogues index it."""
        for buf in self.serial:
            if buf not in self.reducers and buf not in self._gemm_accumulators:
                self.set_layout(buf, make_fully_replicated_fragment([as_int(e) for e in buf.ty.shape],
                                                                     self.threads_of(buf).count),
                                f"the element access to `{buf.name}` outside T.Parallel (every thread reads it)",
                                None)

    def check_owned_accesses(self) -> None:
        """Each element access outside T.Parallel to a gemm accumulator (laid out by the gemm, one thread an
        element) must provably touch an element of the accessing thread: `acc[i, j]` with i, j functions of the
        thread index (and loop variables) such that the layout maps (i, j) to that very thread. LowerFragmentAccess
        then reads the thread's own slot. Anything else is an error naming the access."""
        owned = [buf for buf in self.serial if buf in self._gemm_accumulators and buf not in self.reducers]
        if not owned:
            return
        ana = tvm.sym.Analyzer()
        tid = self.threads.linear_thread_id()
        for tag, var in self.threads.vars.items():
            ana.bind(var, tvm.ir.Range(0, self.threads.extents[tag]))

        def on_node(node):
            if isinstance(node, tirx.For):
                ana.bind(node.loop_var, tvm.ir.Range.from_min_extent(node.min, node.extent))
            elif isinstance(node, tirx.LetStmt) and not _has_call(node.value):
                ana.bind(node.var, node.value)  # index arithmetic (`row = tx // 8`); not loads or calls

        tvm_ffi.structural_walk(self.func.body, [(tirx.For, on_node), (tirx.LetStmt, on_node)], order="pre")

        locs = [None]  # the innermost enclosing loop that names its source line

        def on_for(node, mutator, guards):
            if is_parallel(node):
                return node
            locs.append(loc_of(node) or locs[-1])
            try:
                return mutator.default_mutate(node)
            finally:
                locs.pop()

        def on_eval(node, mutator, guards):
            if is_tile_op(node.value):
                return node
            check(node, guards)
            return node

        def on_store(node, mutator, guards):
            if isinstance(node, tirx.LetStmt):  # its value here, its body as any other statements
                check(node.value, guards)
                return mutator.default_mutate(node)
            check(node, guards)  # a BufferStore or a Bind: no statements inside
            return node

        checked = [0]

        def check(node, guards):
            for access in collect_accesses(node):
                if access.buffer not in owned:
                    continue
                checked[0] += 1
                buf, layout, home = access.buffer, self.layouts[access.buffer], self.threads_of(access.buffer)
                reach = self._reach(guards, None, "an element access", locs[-1])
                proved = False
                if int(layout.replicate_size) == 1:
                    thread = layout.thread(list(access.indices)) + home.first
                    if isinstance(tid, Var) and "threadIdx.y" not in self.threads.vars \
                            and "threadIdx.z" not in self.threads.vars:
                        # count threads from the range's first: `(tx - 128) // 8` simplifies once tx = 128 + t
                        rel = tirx.Var("t", str(tid.ty.dtype))
                        ana.bind(rel, tvm.ir.Range(0, reach.count))
                        thread = substitute(thread, {tid: rel + reach.first})
                        proved = ana.can_prove_equal(thread, rel + reach.first)
                    else:
                        with ana.constraint_scope(tirx.And(tid >= reach.first, tid < reach.first + reach.count)):
                            proved = ana.can_prove_equal(thread, tid)
                if not proved:
                    index = ", ".join(str(i) for i in access.indices)
                    raise CompileError(
                        f"the element access `{buf.name}[{index}]` outside T.Parallel (run by {reach}) cannot be "
                        f"shown to touch an element of the accessing thread: `{buf.name}` is laid out by "
                        f"{self.origin.get(buf)} as {layout!r}, so thread t may only access elements that layout "
                        "puts on t. Index it through the layout (e.g. rows and columns derived from the thread "
                        "index), walk it with T.Parallel, or copy it to shared memory first", locs[-1], STAGE)

        map_with_guards(self.func.body, self.threads, on_for, on_eval, on_store)
        # Accesses elsewhere (an `if` condition, a let binding) were not checked: they must not be lowered unchecked.
        unchecked = []

        def count(node):
            if isinstance(node, tirx.For) and is_parallel(node):
                return tvm_ffi.WalkResult.SKIP
            if isinstance(node, tirx.Evaluate) and is_tile_op(node.value):
                return tvm_ffi.WalkResult.SKIP
            if isinstance(node, TensorLoad) and node.source in owned:
                unchecked.append(node.source)
            if isinstance(node, tirx.BufferStore) and node.buffer in owned:
                unchecked.append(node.buffer)
            return None

        tvm_ffi.structural_walk(self.func.body, [(tirx.For, count), (tirx.Evaluate, count), (TensorLoad, count),
                                                 (tirx.BufferStore, count)], order="pre")
        if len(unchecked) != checked[0]:
            raise CompileError(
                f"an element access to `{unchecked[0].name}` outside T.Parallel sits in a condition, where it cannot "
                f"be checked to touch the accessing thread's own element of the gemm accumulator (laid out by "
                f"{self.origin.get(unchecked[0])}); read it into a variable first (`v = {unchecked[0].name}[...]`)",
                None, STAGE)

    def follow_writers_without_barriers(self) -> None:
        """With TL_DISABLE_THREAD_STORAGE_SYNC the user places the barriers, and writes none between two T.Parallel
        nests that pass a shared tile element for element (`o_shared[i, d] = acc_o[i, d] / l[i]`, then
        `out[..., d] = o_shared[i, d]`): they expect each element read by the thread that wrote it. A nest over no
        fragment would otherwise take a plan of its own (coalesced, not the writer's threads), and read elements
        other threads have not written yet: it runs where the writing nest ran instead. With the compiler's
        barriers the coalesced plan stays."""
        if not self.plain_nests:
            return
        writers: dict = {}  # shared tile -> the planned nest that last wrote it element for element
        nests = sorted([*self.nests, *self.plain_nests], key=lambda n: self.walk_order[n.loop.__chandle__()])
        for nest in nests:
            elementwise = [a for a in collect_accesses(nest.body) if scope_of(a.buffer) in ("shared", "shared.dyn")
                           and _index_positions(a.indices, nest.loop_vars) == list(range(len(nest.loop_vars)))
                           and self._same_shape(a.buffer, nest.extents)]
            if nest.plan is None:
                writer = next((writers[a.buffer] for a in elementwise if not a.is_store and a.buffer in writers), None)
                if writer is None or writer.reach != nest.reach:  # same tile walked whole: same extents
                    continue
                nest.plan, nest.recipe = writer.plan, writer.recipe
                self.nests.append(nest)
            for access in elementwise:
                if access.is_store:
                    writers[access.buffer] = nest

    def fix_from_annotations(self) -> None:
        annotations = self.func.attrs[ANNOTATIONS_ATTR] if ANNOTATIONS_ATTR in self.func.attrs else {}
        for buf, layout in annotations.items():
            if isinstance(layout, Fragment):
                self.set_layout(buf, layout, "T.annotate_layout", None)

    def run(self) -> None:
        self.collect()
        self.rowwise = self._reduced_along_rows()
        self.fix_reducers()
        self.fix_from_annotations()
        self.fix_serial_accesses()
        self.fix_from_ops()
        while True:
            if self.fix_from_ops() or self.propagate(defer_waiting=True) or self.choose_free(preferred_only=True):
                continue
            if not (self.propagate() or self.choose_free()):
                break
        self.follow_writers_without_barriers()
        self.check()
        self.check_owned_accesses()


def _constant_from_zero(nest: list) -> bool:
    return all(as_int(level.extent) is not None and as_int(level.min) == 0 for level in nest)


def _has_call(expr: Any) -> bool:
    found: list = []
    tvm_ffi.structural_walk(expr, [(tvm.ir.Call, found.append), (TensorLoad, found.append)])
    return bool(found)


def layout_inference(func: tirx.PrimFunc, configs: dict) -> tirx.PrimFunc:
    inference = _Inference(func, configs)
    inference.run()
    if not inference.fragments:
        return func
    nests = {n.loop.__chandle__(): n for n in inference.nests}

    def on_for(node, mutator):
        nest = nests.get(node.__chandle__())
        if nest is None:
            return mutator.default_mutate(node)
        loop = node
        for buf, exchange in nest.exchanges.items():
            loop = replace_buffer(loop, buf, exchange.copy)
        annotations = dict(loop.annotations)
        annotations[PARALLEL_LOOP_LAYOUT] = nest.plan.fragment
        annotations[LOOP_PLAN] = {**nest.recipe, "threads": [nest.reach.first, nest.reach.count]}
        if nest.exchanges:
            annotations[LAYOUT_EXCHANGES] = [[buf, x.copy, x.tile, int(x.written)] for buf, x in nest.exchanges.items()]
        return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body, loop.thread_binding, annotations,
                        loop.step)

    def on_eval(node, mutator):
        found = inference.reduce_exchanges.get(node.__chandle__())
        return node if found is None else _relaid_reduce(node, *found, inference)

    func = tvm_ffi.structural_mutate(func, [(tirx.For, on_for), (tirx.Evaluate, on_eval)])
    exchanged = [x for n in inference.nests for x in n.exchanges.values()]
    declared = [b for _, scratch, tile, _ in inference.reduce_exchanges.values() for b in (scratch, tile)]
    if exchanged or declared:
        declared += [b for x in exchanged for b in ((x.tile,) if x.copy is x.tile else (x.copy, x.tile))]
        func = func.with_body(declare_buffers(func.body, declared))
    return func.with_attr(LAYOUTS_ATTR, {buf: layout for buf, layout in inference.layouts.items()})


def _relaid_reduce(node: tirx.Evaluate, op: Reduce, scratch, tile, reach: ThreadRange, inference: _Inference):
    """The reduction into `scratch`, its result relaid out to the op's destination through `tile` after it (and the
    destination's old values to `scratch` before it, for clear=False)."""
    call = node.value
    dst = op.dst.buffer
    region = dataclasses.replace(op.dst, buffer=scratch)
    reduce = tirx.Evaluate(tvm.ir.Call(call.op, [call.args[0], region.to_ir(), *list(call.args)[2:]],
                                       attrs=call.attrs, ret_ty="int32"))
    thread = inference.threads.linear_thread_id()
    thread = thread - reach.first if reach.first else thread
    relay = [inference.layouts, thread, reach.count, inference.analyzer]
    after = relayout(scratch, dst, tile, *relay)
    if op.clear:
        return tirx.SeqStmt([reduce, after])
    return tirx.SeqStmt([relayout(dst, scratch, tile, *relay), reduce, after])


def LayoutInference(configs):  # noqa: N802
    return tl_pass("LayoutInference", lambda func: layout_inference(func, configs))
