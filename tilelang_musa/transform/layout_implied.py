"""The layout a planned T.Parallel nest implies for a fragment it touches that has none yet: the element an
iteration touches lives on the iteration's thread (reduced over the loop variables the index ignores, replicated
when every iteration reads it). A part of _Inference (layout_inference.py)."""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import CompileError
from ..layout import Fragment, LayoutError, make_fully_replicated_fragment, reduce_fragment
from ..layout._digits import DigitError, complement, used_digits
from .layout_access import access_map, compose, index_positions, invariant_split, strided_split, uses_var
from .layout_decisions import STAGE, NestDecision


def slots_from_zero(layout: Fragment) -> Fragment:
    """`layout` with its slots shifted down to start at 0. A loop that reads its source fragment at a column offset
    (`post[i, j] = f(mixes[i, j + 4])`, DeepSeek's mHC split) plans slot `j + 4`; a new fragment holding its results
    has registers of its own, slots 0.. (else slots 0..3 were holes, and copying it out could not invert it). The
    threads stay as planned: no element moves."""
    index = layout.forward_index
    if len(index) != 1:
        return layout
    ana = tvm.sym.Analyzer()
    for var, extent in zip(layout.forward_vars, layout.input_shape):
        ana.bind(var, tvm.ir.Range.from_min_extent(0, extent))
    low = ana.const_int_bound(index[0]).min_value
    if not 0 < low < (1 << 31):
        return layout
    return Fragment.from_exprs(layout.input_shape, layout.forward_vars, layout.forward_thread, index[0] - low,
                               replicate=layout.replicate_size, replicate_var=layout.replicate_var)


class ImpliedLayouts:
    """`_implied(buf, indices, nest)`: the layout of `buf` that `nest`'s plan implies through that access."""

    def _implied(self, buf, indices, nest: NestDecision) -> Fragment:
        positions = index_positions(indices, nest.loop_vars)
        shape = self._shape(buf)
        if not any(uses_var(e, v) for e in indices for v in nest.loop_vars) and not self._writes(nest, buf):
            # `s[0]` read by every iteration (a reduction's result broadcast): every thread of the nest holds it
            return make_fully_replicated_fragment(shape, nest.reach.count)
        if positions is None:
            index_map = access_map(indices, nest.loop_vars, nest.extents, shape)
            if index_map is not None:  # each element visited once: it lives where its iteration runs
                try:
                    return compose(nest.plan.fragment, index_map.inverse())
                except LayoutError:
                    pass
        if positions is None:
            shared = self._read_by_several(buf, indices, nest, shape)
            if shared is not None:
                return shared
        if positions is None:
            split = invariant_split(indices, nest.loop_vars)
            if split is not None and [nest.extents[p] for _, p in split[0]] == [shape[d] for d, _ in split[0]]:
                return self._held_along(buf, split, nest)
        if positions is None:
            strided = strided_split(indices, nest.loop_vars, nest.extents, shape)
            if strided is not None and [nest.extents[p] for _, p in strided[0]] == [strided[2][d] for d, _ in strided[0]]:
                return self._held_along_strided(buf, strided, nest)
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
        return slots_from_zero(layout)

    def _boxed_like_source(self, buf, indices, nest: NestDecision) -> Fragment | None:
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


    def _read_by_several(self, buf, indices, nest: NestDecision, shape: list) -> Fragment | None:
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
        index_map = access_map(tuple(indices) + (rep,), nest.loop_vars, nest.extents, shape + [count])
        if index_map is None:
            return None
        try:
            return reduce_fragment(compose(nest.plan.fragment, index_map.inverse()), len(shape))
        except LayoutError:
            return None

    def _held_along_strided(self, buf, strided, nest: NestDecision) -> Fragment:
        """`buf[i, jj * 4 + j]` in a nest over (i, j in 4), jj fixed in the nest (a serial loop's variable): as
        _held_along with the column split into (jj, j) digits, the thread running iteration (i, j) holds every
        `buf[i, jj * 4 + j]`, each jj in its own slot."""
        walked, fixed, virtual, split = strided
        held = self._held_along(buf, (walked, fixed), nest, virtual)
        shape = self._shape(buf)
        fvars = [tirx.Var(f"x{d}", "int32") for d in range(len(shape))]
        coords = []
        for d, x in enumerate(fvars):
            coords += [tirx.floordiv(x, split[d]), tirx.floormod(x, split[d])] if d in split else [x]
        return Fragment.from_exprs(shape, fvars, held.thread(coords, rep=held.replicate_var), held.index(coords),
                                   replicate=held.replicate_size, replicate_var=held.replicate_var)

    def _held_along(self, buf, split, nest: NestDecision, shape: list | None = None) -> Fragment:
        """`buf[k, i]` in a nest over i, k fixed in the nest (a serial loop's variable): the thread running
        iteration i holds every `buf[*, i]`, the dimensions indexed by k kept in its own slots. (`shape`: the
        fragment's, or a view of it with dimensions split, _held_along_strided's.)"""
        walked, fixed = split
        layout = nest.plan.fragment
        used = [p for _, p in walked]
        try:
            for dim in reversed([d for d in range(len(nest.loop_vars)) if d not in used]):
                layout = reduce_fragment(layout, dim)
        except LayoutError as err:
            raise CompileError(f"cannot place fragment `{buf.name}`: {err}", nest.loc, STAGE) from None
        shape = self._shape(buf) if shape is None else shape
        fvars = [tirx.Var(f"x{d}", "int32") for d in range(len(shape))]
        outer = [fvars[d] for d, _ in walked]
        slot, stride = 0, 1
        for d in reversed(fixed):
            slot, stride = slot + fvars[d] * stride, stride * shape[d]
        return Fragment.from_exprs(shape, fvars, layout.thread(outer, rep=layout.replicate_var),
                                   layout.index(outer) * stride + slot, replicate=layout.replicate_size,
                                   replicate_var=layout.replicate_var)

