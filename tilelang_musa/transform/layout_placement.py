"""LayoutInference's placement: fixed requirements (tile ops, annotations, reducers, element accesses outside
T.Parallel), propagation through the T.Parallel nests, and the free choice for what is still open (the levels of
layout_inference.py's docstring). A part of _Inference, which holds the state and runs the levels to a fixed point."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import tvm
from tvm import tirx

from ..errors import CompileError
from ..ir.attrs import ANNOTATIONS_ATTR, REDUCERS_ATTR
from ..ir.utils import as_int, collect_accesses, scope_of, substitute
from ..layout import Fragment, Layout, LayoutError, make_fully_replicated_fragment, reduce_fragment, reduce_threads
from ..tileop import LayoutInferArgs
from ..tileop.loop_plan import LoopPlan, fragment_plan, free_plan, line_plan, region_plan, row_plan, vector_width
from ..tileop.parallel import writes_only_thread_private
from ..tileop.reduce import Reduce
from ..tileop.region import Region
from .buffer_roles import annotated_buffers, unswizzled_tiles, view_buffers
from .gemm_groups import accumulator_groups
from .layout_access import access_map, box_access, compose, index_positions, invariant_terms, uses_var
from .layout_decisions import STAGE, NestDecision
from .partition_parallel_loop import coalesced_width


class Placement:
    """Chooses `layouts` (with `origin`, the reason of each) and each nest's plan (with its `reason`)."""

    @functools.cached_property
    def _op_args(self) -> LayoutInferArgs:
        """What every tile op's inference reads; the function's walks are done once (`layouts` grows in place)."""
        return LayoutInferArgs(self.func.attrs["target"] if "target" in self.func.attrs else None,
                               self.threads.num_threads, self.layouts, self.options, annotated_buffers(self.func),
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

    def _touches(self, nest: NestDecision, bufs: set) -> bool:
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
                    if index_positions(indices, nest.loop_vars) == list(
                            range(len(nest.loop_vars))) and self._same_shape(buf, nest.extents):
                        nest.plan, nest.source = fragment_plan(layout, nest.extents), buf
                        nest.recipe = {"kind": "fragment", "fragment": layout}
                        nest.reason = f"runs where `{buf.name}` lives (it walks it whole; {self.origin[buf]})"
                    else:
                        through = self._plan_through(buf, layout, indices, nest)
                        if through is None:
                            continue
                        (nest.plan, nest.recipe), nest.source = through, buf
                        nest.reason = (f"runs where the elements of `{buf.name}` it indexes live "
                                       f"({nest.recipe['kind']} access; {self.origin[buf]})")
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

    def _plan_through(self, buf, layout: Fragment, indices, nest: NestDecision) -> tuple[LoopPlan, dict] | None:
        """The nest's plan (and its recipe) when it follows `buf` (laid out as `layout`) through an access other
        than the identity: an affine map onto the whole fragment (`frag[i * 8 + j]`), or a box of it
        (`frag[i, j + 32]` over a part of the fragment); None for other accesses."""
        if nest.inner and any(uses_var(e, v) for e in indices for v in nest.inner):
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
        if _moving_offsets(indices, list(nest.loop_vars) + list(nest.inner)):
            return self._plan_through_offsets(buf, layout, indices, nest)
        shape = self._shape(buf)
        index_map = access_map(indices, nest.loop_vars, nest.extents, shape)
        if index_map is not None:
            composed = compose(layout, index_map)
            try:  # the loop is lowered through the plan's inverse (`f[127 - i]`: no inverter handles it)
                composed.inverse()
            except LayoutError:
                return None
            return fragment_plan(composed, nest.extents), {"kind": "fragment", "fragment": composed}
        box = box_access(indices, nest.loop_vars, nest.extents, shape)
        if box is None:
            return None
        fvars = [tirx.Var(f"x{k}", "int32") for k in range(len(nest.loop_vars))]
        exprs = [substitute(e, dict(zip(nest.loop_vars, fvars))) for e in indices]
        placement = compose(layout, Layout.from_exprs(nest.extents, fvars, exprs))
        origin, positions = box
        recipe = {"kind": "region", "fragment": placement, "whole": layout, "shape": shape, "origin": origin,
                  "positions": [-1 if k is None else k for k in positions]}
        return region_plan(fragment_plan(layout, shape), placement, origin, positions, nest.extents), recipe

    def _plan_through_offsets(self, buf, layout: Fragment, indices, nest: NestDecision):
        """`f[i + s * 16, j]` with `s` fixed in the nest (a serial loop's variable around it): plan as `f[i, j]`
        would, kept only if the thread so chosen holds the element for every value the fixed part takes (`_conflict`
        checks each, over the iterations the `if`s around the access let through), as it does where `f`'s layout
        repeats every 16 rows (a gemm accumulator's). Else None: the nest takes a plan of its own."""
        moving = _moving_offsets(indices, list(nest.loop_vars) + list(nest.inner))
        moved = tuple(moving[d][1] if d in moving else e for d, e in enumerate(indices))
        if index_positions(moved, nest.loop_vars) == list(range(len(nest.loop_vars))) and \
                self._same_shape(buf, nest.extents):
            through = fragment_plan(layout, nest.extents), {"kind": "fragment", "fragment": layout}
        else:
            through = self._plan_through(buf, layout, moved, nest)
        if through is None:
            return None
        nest.plan, nest.recipe = through
        try:
            if self._conflict(nest, buf, indices, layout, every_offset=True) is not None:
                through = None
        except CompileError:  # an access it cannot check
            through = None
        finally:
            nest.plan, nest.recipe = None, None
        return through

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
                nest.reason = (f"free choice: the {'row' if plan else 'coalesced'} partition over {nest.reach.count} "
                               f"threads, {width}-wide pieces" + (" (keeps the rows of a fragment reduced along them, "
                                                                   "or read per row, on their own threads)" if plan else ""))
                self._plan_lines_if_unreducible(nest, width)
                return True
        return False

    def _plan_lines_if_unreducible(self, nest: NestDecision, width: int) -> None:
        """Where the nest's free plan would place a fragment that a T.reduce_* cannot reduce (a line of 320 or 200
        that does not split evenly over a power of two of threads: rows straddling thread groups, or a row on 80
        threads), the nest takes line_plan along the reduced dimension instead: each line on a power-of-two group of
        threads, the last round of pieces partial (upstream reduces such fragments too)."""
        reduced: dict = {}
        for op in self.ops:
            if isinstance(op, Reduce):
                reduced.setdefault(op.src.buffer, set()).add(op.dim)
        for buf, indices in nest.accesses:
            if buf in self.layouts or buf not in reduced:
                continue
            try:
                bad = [d for d in sorted(reduced[buf]) if not _reducible(self._implied(buf, indices, nest), d)]
            except (CompileError, LayoutError):  # an access the plan cannot place: reported where it is placed
                continue
            if not bad or not self._walks_whole(buf, indices, nest):
                continue
            # the loop level walking the reduced dim (a unit dim indexed by 0 is no level: `T.copy(A[bx, 0], x)`)
            line_dim = next((p for p, v in enumerate(nest.loop_vars) if indices[bad[0]].same_as(v)), None)
            if line_dim is None:
                continue
            before = nest.plan, nest.recipe, nest.reason
            nest.plan = line_plan(nest.extents, nest.reach.count, width, line_dim)
            nest.recipe = {"kind": "line", "width": width, "line_dim": line_dim}
            nest.reason = (f"free choice: each line along dim {line_dim} on a power-of-two group of threads, the last "
                           f"round of pieces partial (`{buf.name}` is reduced along it, and the line does not split "
                           f"evenly over {nest.reach.count} threads)")
            try:
                reducible = all(_reducible(self._implied(buf, indices, nest), d) for d in reduced[buf])
            except (CompileError, LayoutError):
                reducible = False
            if not reducible:
                nest.plan, nest.recipe, nest.reason = before
            return

    def _reaches_part(self, nest: NestDecision) -> bool:
        """The nest reaches a fragment not placed yet in fewer iterations than the fragment has elements."""
        iterations = int(np.prod(nest.extents))
        for buf, indices in nest.accesses:
            if buf in self.layouts or buf not in self.fragments:
                continue
            shape = self._shape(buf)
            if None not in shape and iterations < int(np.prod(shape)):
                return True
        return False

    def _reads_row_values(self, buf, indices, nest: NestDecision) -> bool:
        """`buf[i]` in a nest over (i, j): a per-row value (a row reduction's result) with a known layout."""
        positions = index_positions(indices, nest.loop_vars)
        return buf in self.layouts and positions is not None and 0 < len(positions) < len(nest.loop_vars) and \
            positions == list(range(len(positions)))

    @staticmethod
    def _reads(nest: NestDecision, buf) -> bool:
        return any(not a.is_store and a.buffer.same_as(buf) for a in collect_accesses(nest.body))

    @staticmethod
    def _writes(nest: NestDecision, buf) -> bool:
        return any(a.is_store and a.buffer.same_as(buf) for a in collect_accesses(nest.body))

    def _walks_whole(self, buf, indices, nest: NestDecision) -> bool:
        # a unit dimension indexed by 0 is no dimension of the walk: `T.copy(A[bx, 0], x)` into a (1, N) row
        # fragment is a nest over N alone
        kept = [(extent, index) for extent, index in zip(self._shape(buf), indices)
                if not (extent == 1 and as_int(index) == 0)]
        return index_positions(tuple(index for _, index in kept), nest.loop_vars) == \
            list(range(len(nest.loop_vars))) and [extent for extent, _ in kept] == list(nest.extents)

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


    def _place_reached_parts(self, nest: NestDecision) -> bool:
        """Give each fragment not placed yet that `nest` reaches only in part (a box: `l[i]` for `i < 4` of 16 rows)
        the layout a nest walking it whole would get, so that `nest` can then follow that box; True if any was
        placed. Used once every open nest reaches a fragment in part: nothing will walk it whole."""
        placed = False
        for buf, indices in nest.accesses:
            shape = self._shape(buf)
            if buf in self.layouts or buf not in self.fragments or None in shape or \
                    box_access(indices, nest.loop_vars, nest.extents, shape) is None or \
                    self._same_shape(buf, nest.extents):
                continue
            plan = free_plan(shape, nest.reach.count, 1)
            self.set_layout(buf, plan.fragment, f"the whole-fragment plan of `{buf.name}`, which T.Parallel loops "
                            f"reach only in part (the first at {nest.loc})", nest.loc)
            placed = True
        return placed


    def fix_reducers(self) -> None:
        """A reducer (T.alloc_reducer) is held whole by every thread: each adds its own iterations to its copy."""
        attrs = self.func.attrs
        for buf in (attrs[REDUCERS_ATTR].keys() if attrs is not None and REDUCERS_ATTR in attrs else ()):
            self.reducers.add(buf)
            self.set_layout(buf, make_fully_replicated_fragment([as_int(e) for e in buf.ty.shape],
                                                                 self.threads_of(buf).count), "T.alloc_reducer", None)

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
                           and index_positions(a.indices, nest.loop_vars) == list(range(len(nest.loop_vars)))
                           and self._same_shape(a.buffer, nest.extents)]
            if nest.plan is None and not writes_only_thread_private(nest.body):  # those run in every thread
                writer = next((writers[a.buffer] for a in elementwise if not a.is_store and a.buffer in writers), None)
                if writer is None or writer.reach != nest.reach:  # same tile walked whole: same extents
                    continue
                nest.plan, nest.recipe = writer.plan, writer.recipe
                nest.reason = (f"runs where the T.Parallel loop at {writer.loc} wrote the shared tile it reads "
                               "(TL_DISABLE_THREAD_STORAGE_SYNC: the user places the barriers)")
                self.nests.append(nest)
            for access in elementwise:
                if access.is_store:
                    writers[access.buffer] = nest

    def fix_from_annotations(self) -> None:
        annotations = self.func.attrs[ANNOTATIONS_ATTR] if ANNOTATIONS_ATTR in self.func.attrs else {}
        for buf, layout in annotations.items():
            if isinstance(layout, Fragment):
                self.set_layout(buf, layout, "T.annotate_layout", None)


def _moving_offsets(indices, walked: list) -> dict:
    """The dimensions whose index adds a part that is not constant and uses none of `walked` (`s * 16` in
    `f[r + s * 16, d]`, `s` a serial loop's variable around the nest): {dimension: (invariant, walked part)}."""
    analyzer = tvm.sym.Analyzer()
    found = {}
    for d, index in enumerate(indices):
        parts = invariant_terms(index, walked)
        if parts is not None and as_int(analyzer.simplify(parts[0])) is None:
            found[d] = parts
    return found


def _reducible(layout: Fragment, dim: int) -> bool:
    """A T.reduce_* along `dim` can reduce a fragment of `layout`: its result has a layout, and the threads sharing
    a line form power-of-two splits the combine template runs."""
    try:
        reduce_fragment(layout, dim)
        splits = reduce_threads(layout, dim).splits
    except (LayoutError, CompileError):
        return False
    return all(n > 0 and not n & (n - 1) for s in splits for n in (s.count, s.scale))
