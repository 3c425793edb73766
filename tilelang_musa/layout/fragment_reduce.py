"""The layout side of `T.reduce_*(src, dst, dim)` on a fragment: where the result lives, and which threads
must combine their partial results.

Lowering a reduction is: each thread folds the elements of a row it holds in its own slots, then the threads
holding parts of the same row combine their partials, and every one of them keeps the result. So

- `reduce_fragment(src, dim)`: the fragment of `dst` (src's shape without `dim`), element `y` replicated on
  exactly the threads that held some `src[y with dim=j]` in some replica. Its replica number enumerates the
  digits of `j` that the thread map uses (the other digits stay in registers), then src's replica.
- `reduce_threads(src, dim)`: those thread groups, and their shape for a template. Every group is
  `t0 + sum_k d_k * scale_k` (`d_k < count_k`, splits ascending in scale); with power-of-two counts and
  scales and `t0` clear of those bits (`butterfly`), an xor butterfly over lanes `scale_k << b` apart combines
  a group, split by split: `for off in xor_offsets(): v = op(v, shfl_xor(v, off))`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._digits import DigitError, used_digits
from ._expr import as_expr, const_int, make_vars, simplify, substitute
from .fragment import Fragment, new_replicate_var
from .layout import LayoutError


@dataclass(frozen=True)
class ThreadSplit:
    """`count` threads, `scale` apart."""

    count: int
    scale: int


@dataclass(frozen=True)
class ReduceThreads:
    """The thread groups that combine partial results of one reduction (see the module docstring)."""

    splits: tuple[ThreadSplit, ...]
    groups: tuple[tuple[int, ...], ...]  # every distinct group, sorted; groups are disjoint
    butterfly: bool

    @property
    def group_size(self) -> int:
        return int(np.prod([s.count for s in self.splits], dtype=np.int64))

    def xor_offsets(self) -> list[int]:
        """Lane distances of the butterfly steps, largest first (as a shuffle-xor reduction runs them)."""
        if not self.butterfly:
            raise LayoutError(f"the thread groups {self.splits} are not closed under xor: an xor butterfly cannot "
                              "combine them")
        offsets = [s.scale << b for s in self.splits for b in range(s.count.bit_length() - 1)]
        return sorted(offsets, reverse=True)


def reduce_fragment(src: Fragment, dim: int) -> Fragment:
    """The fragment of the result of reducing `src` along `dim` (see the module docstring)."""
    dim = src._dim(dim, "reduce")
    extent = const_int(src.input_size[dim])
    if extent is None:
        raise LayoutError(f"Fragment.reduce: dim {dim} of {src!r} has a symbolic extent")
    dom = src._dom()
    dom[src.replicate_var] = src.replicate_size
    rvar = src.forward_vars[dim]
    try:
        digits = used_digits(src.forward_thread, rvar, dom)
    except DigitError as err:
        raise LayoutError(f"Fragment.reduce: cannot tell which threads share a row of {src!r} along dim {dim}: "
                          f"{err}") from None

    kept = [e for d, e in enumerate(src.input_size) if d != dim]
    fvars = make_vars(max(len(kept), 1))
    if not kept:  # reducing a 1-d fragment gives one element
        kept = [as_expr(1)]
    rep = new_replicate_var()
    # The replica number r enumerates the used digits of the reduced coordinate (lowest first), then src's replica.
    coord, stride = as_expr(0), 1
    for digit in digits:
        coord = coord + (rep // stride % digit.extent) * digit.lower
        stride *= digit.extent
    vmap = {rvar: coord, src.replicate_var: rep // stride}
    others = iter(fvars)
    for d, var in enumerate(src.forward_vars):
        if d != dim:
            vmap[var] = next(others)
    replicate = stride * src.replicate_size
    thread = simplify(substitute(src.forward_thread, vmap), {**dict(zip(fvars, kept)), rep: replicate})
    try:
        return Fragment.from_exprs(kept, fvars, thread, None, replicate=replicate, replicate_var=rep)
    except LayoutError as err:
        raise LayoutError(f"Fragment.reduce: cannot place the result of reducing {src!r} along dim {dim}: "
                          f"{err}") from None


def reduce_threads(src: Fragment, dim: int) -> ReduceThreads:
    """The groups of threads that hold parts of one row along `dim` (one group per row and src replica)."""
    dim = src._dim(dim, "reduce_threads")
    src._require_static("reduce_threads")
    thread, _ = src.evaluate_all()  # shape: input_shape + [replicate]
    rows = np.moveaxis(thread, dim, -1).reshape(-1, thread.shape[dim])
    groups = sorted({tuple(sorted(set(row.tolist()))) for row in rows})
    offsets = {tuple(t - g[0] for t in g) for g in groups}
    if len(offsets) != 1:
        raise LayoutError(f"Fragment.reduce_threads: rows of {src!r} along dim {dim} are held by thread groups of "
                          f"different shapes, e.g. {groups[0]} and {groups[-1]}")
    seen: set[int] = set()
    for g in groups:
        if seen.intersection(g):
            raise LayoutError(f"Fragment.reduce_threads: rows of {src!r} along dim {dim} are held by overlapping "
                              f"thread groups (thread {sorted(seen.intersection(g))[0]} is in two)")
        seen.update(g)
    splits = _splits(next(iter(offsets)), src, dim)
    return ReduceThreads(tuple(splits), tuple(groups), _is_butterfly(splits, groups))


def _splits(offsets: tuple[int, ...], src: Fragment, dim: int) -> list[ThreadSplit]:
    """Write the offset set as {sum_k d_k * scale_k}, smallest scale first."""
    wanted, covered, splits = set(offsets), {0}, []
    while covered != wanted:
        scale = min(wanted - covered)
        count = 1
        while {c + count * scale for c in covered} <= wanted:
            count += 1
        if count == 1:
            raise LayoutError(f"Fragment.reduce_threads: the threads sharing a row of {src!r} along dim {dim} "
                              f"(offsets {sorted(wanted)}) are not a regular grid of lanes")
        covered = {c + m * scale for c in covered for m in range(count)}
        splits.append(ThreadSplit(count, scale))
    return splits


def _is_butterfly(splits: list[ThreadSplit], groups: list[tuple[int, ...]]) -> bool:
    def pow2(x: int) -> bool:
        return x > 0 and x & (x - 1) == 0

    if not all(pow2(s.count) and pow2(s.scale) for s in splits):
        return False
    offsets = [s.scale << b for s in splits for b in range(s.count.bit_length() - 1)]
    return all({t ^ off for t in g} == set(g) for g in groups for off in offsets)



def widen_to_aligned_spans(threads: ReduceThreads, block_threads: int) -> ThreadSplit | None:
    """A single split whose groups sit off the aligned spans the combine template works on (threads [32, 96) of
    128 for 64 threads, one apart): the smallest wider power-of-two group, `scale` apart, whose aligned spans each
    hold at most one of the groups. Its extra members must contribute the identity. None when no such widening
    exists (several splits, a non-power-of-two count or scale, or two groups sharing every span up to the
    block's)."""
    if threads.butterfly or len(threads.splits) != 1:
        return None
    split = threads.splits[0]
    if split.scale & (split.scale - 1) or split.count & (split.count - 1):
        return None
    count = split.count * 2
    while count * split.scale <= block_threads:
        span = count * split.scale
        spans = [{t // span for t in g} for g in threads.groups]
        if all(len(s) == 1 for s in spans) and len({next(iter(s)) for s in spans}) == len(spans):
            return ThreadSplit(count, split.scale)
        count *= 2
    return None


def holder_ranges(src: Fragment) -> list[tuple[int, int]]:
    """The threads holding some element of `src`, as sorted half-open ranges [lo, hi)."""
    src._require_static("holder_ranges")
    thread, _ = src.evaluate_all()
    ranges: list[tuple[int, int]] = []
    for t in sorted(set(np.asarray(thread).ravel().tolist())):
        if ranges and ranges[-1][1] == t:
            ranges[-1] = (ranges[-1][0], t + 1)
        else:
            ranges.append((t, t + 1))
    return ranges
