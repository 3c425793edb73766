"""Which element a (thread, slot) of a fragment holds, and whether it holds one at all.

A fragment need not use every slot of every thread below its `num_threads`: rows on thread groups with a gap
between them ([0, 64) and [128, 192) of 256 threads hold nothing on [64, 128)), or 40 rows on 32 threads x 2
slots. Code that walks a thread's slots (a parallel loop over the fragment, a reduction's fold, the store of its
results) then inverts the fragment over a padded shape (Fragment.inverse(padded=True)) and runs a slot only where
it maps back to itself: `owned_element`. When every thread that holds anything holds all its slots (the groups
with a gap), the guard is a test of the thread id alone: `holder_guard`, which keeps the slot loop unguarded.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from tvm import tirx

from ..layout import Fragment
from ..layout.fragment_reduce import holder_ranges


def owned_element(fragment: Fragment, thread: Any, slot: Any, extents: list[int] | None = None) -> tuple:
    """(indices, condition) of the element in `slot` of `thread`: the condition is None where every (thread, slot)
    of the fragment's threads holds one, else true exactly for the pairs that do (the indices are out of range,
    or map to another pair, elsewhere). `extents`: the fragment's shape, if the caller has it as ints."""
    bijective = fragment.is_bijective()
    if bijective:
        return fragment.inverse(thread, slot), None
    *xs, rep = fragment.inverse(thread, slot, padded=True, return_rep=True)
    # the replica too: each replica's threads hold (and a loop over the fragment writes) their own copy
    cond = tirx.And(tirx.EQ(fragment.thread(xs, rep), thread), tirx.EQ(fragment.index(xs), slot))
    bounds = list(zip(xs, extents if extents is not None else fragment.input_shape))
    if int(fragment.replicate_size) > 1 or not (isinstance(rep, tirx.IntImm) and rep.value == 0):
        bounds.append((rep, fragment.replicate_size))
    for x, e in bounds:
        cond = tirx.And(cond, tirx.And(x >= 0, x < e))
    return xs, cond


def fills_its_threads(fragment: Fragment) -> bool:
    """Every thread holding some element of `fragment` holds one in each of its slots (whatever the threads
    between them hold)."""
    thread, slot = (np.asarray(a, dtype=np.int64).ravel() for a in fragment.evaluate_all())
    local = int(fragment.local_size)
    return np.unique(thread * local + slot).size == np.unique(thread).size * local


def holder_guard(fragment: Fragment, thread: Any) -> Any:
    """The condition `thread` holds some element of `fragment`, as ranges of thread ids: `(tx < 64) || ((128 <=
    tx) && (tx < 192))`."""
    held = [tirx.And(lo <= thread, thread < hi) if lo else thread < hi for lo, hi in holder_ranges(fragment)]
    return functools.reduce(tirx.Or, held)
