"""Fragment: how a register tile (`T.alloc_fragment`) is spread over the block's threads.

A Fragment maps each logical element `x` of its shape, and each replica `rep` in [0, replicate_size), to the
owning thread `thread(x, rep)` and to a slot `index(x)` of that thread's local array (the same slot in every
replica). Replicas are whole copies held by different threads (an operand every warp reads, a reduction's
result every participating thread keeps). `num_threads` is one past the highest thread; `local_size` is the
per-thread array length.

    F = T.Fragment([16, 16], forward_thread_fn=lambda i, j: i * 2 + j // 8, forward_index_fn=lambda i, j: j % 8)
    F.thread([3, 9]) -> 7;  F.index([3, 9]) -> 1;  F.inverse(7, 1) -> [3, 9]

Without `forward_index_fn` the slot is inferred: the digits of the coordinates that the thread map does not
use, row-major (as upstream). `forward_fn(*x[, rep]) -> (thread, index)` gives both at once. `inverse(thread,
local)` is what lowering needs to turn `for i, j in T.Parallel(...)` over a fragment into a loop over one
thread's slots. The layout side of `T.reduce_*` (the result's fragment, the threads that combine) is
fragment_reduce.py, built on this module.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import tvm
import tvm_ffi
from tvm_ffi.dataclasses import field, py_class

from ..ir.structural_memo import StructuralMemo
from . import _inverse
from ._buffer import buffer_shape_dtype
from ._digits import DigitError, complement, used_digits
from ._reuse import reuse_fields
from ._expr import (Expr, Var, all_const, all_distinct, as_expr, bounds, const_int, evaluate, make_vars, open_grid,
                    simplify, substitute)
from .layout import Layout, LayoutError, as_index_list, normalize_shape, output_extent


# The (thread, slot) arrays of the last few fragments evaluated, by structure: one lowering asks them of the same
# accumulator fragment in several places (its loop plan, bijectivity, vector width, lane exchange), every compile of
# the same tile shapes builds that fragment afresh, and a 256x256 fragment takes milliseconds to evaluate.
_EVALUATED_KEEP = 8
_EVALUATED = StructuralMemo(_EVALUATED_KEEP)
# Whether those fragments are injective, alike (a GEMM's lowering asks it of its accumulator several times).
_INJECTIVE = StructuralMemo(_EVALUATED_KEEP)


def new_replicate_var() -> Var:
    return tvm.tirx.Var("rep", "int32")


@py_class("tl.Fragment", frozen=True, init=False, repr=False)
class Fragment(Layout):
    """Logical element -> (thread, local slot), with replication (see the module docstring)."""

    replicate_var: Var = field(structural_eq="def-simple")
    replicate_size: int
    forward_thread: Expr
    thread_extent: Expr

    def __init__(self, shape: Sequence[Any], forward_fn: Callable[..., Any] | None = None,
                 forward_thread_fn: Callable[..., Any] | None = None, replicate: int = 1,
                 forward_index_fn: Callable[..., Any] | None = None):
        """Upstream's constructor: `forward_fn(*x[, rep]) -> (thread, index)`, or `forward_thread_fn(*x[, rep])`
        with an optional `forward_index_fn(*x)`; the replica Var is passed only when `replicate > 1`."""
        shape = normalize_shape(shape, "T.Fragment")
        fvars, rep = make_vars(len(shape)), new_replicate_var()
        extra = [rep] if replicate > 1 else []
        if forward_fn is not None:
            result = forward_fn(*fvars, *extra)
            if not isinstance(result, (tuple, list)) or len(result) != 2:
                raise LayoutError(f"T.Fragment: forward_fn must return (thread, index), got {result!r}")
            thread, index = result
        elif forward_thread_fn is not None:
            thread = forward_thread_fn(*fvars, *extra)
            index = forward_index_fn(*fvars) if forward_index_fn is not None else None
        else:
            raise LayoutError("T.Fragment needs forward_fn or forward_thread_fn")
        self.__ffi_init__(*_fragment_fields(shape, fvars, thread, index, rep, replicate))

    @classmethod
    def from_exprs(cls, shape: Sequence[Any], forward_vars: Sequence[Var], forward_thread: Any,
                   forward_index: Any = None, *, replicate: int = 1, replicate_var: Var | None = None) -> "Fragment":
        """Build from expressions over `forward_vars` (and `replicate_var`, extent `replicate`); a missing
        `forward_index` is inferred from the thread map."""
        shape = normalize_shape(shape, "Fragment")
        if len(forward_vars) != len(shape):
            raise LayoutError(f"Fragment: {len(forward_vars)} index vars for a {len(shape)}-d shape")
        rep = replicate_var if replicate_var is not None else new_replicate_var()
        obj = cls.__new__(cls)
        obj.__ffi_init__(*_fragment_fields(shape, list(forward_vars), forward_thread, forward_index, rep, replicate))
        return obj

    # ---- sizes ------------------------------------------------------------------------------------------------------
    @property
    def num_threads(self) -> int | Expr:
        """One past the highest owning thread (the block needs at least this many threads)."""
        value = const_int(self.thread_extent)
        return value if value is not None else self.thread_extent

    @property
    def local_size(self) -> int | Expr:
        """Slots per thread."""
        value = const_int(self.output_size[0])
        return value if value is not None else self.output_size[0]

    def get_thread_size(self) -> int | Expr:
        return self.num_threads

    def get_forward_thread(self) -> Expr:
        return self._to_placeholders(self.forward_thread)

    # ---- applying ----------------------------------------------------------------------------------------------------
    def thread(self, indices: Sequence[Any], rep: Any = 0, analyzer: tvm.sym.Analyzer | None = None) -> Expr:
        """The thread holding replica `rep` of element `indices`."""
        return self._apply(self.forward_thread, indices, analyzer, "thread", {self.replicate_var: as_expr(rep)})

    def index(self, indices: Sequence[Any], analyzer: tvm.sym.Analyzer | None = None) -> Expr:
        """The local slot of element `indices` (the same in every replica)."""
        return self._apply(self.forward_index[0], indices, analyzer, "index")

    def evaluate(self, *coords: Any, rep: Any = 0) -> tuple[np.ndarray, np.ndarray]:
        """(thread, slot) at integer coordinates and replica (ints or numpy arrays, broadcast together)."""
        env = self._env(coords, "evaluate")
        env[self.replicate_var] = np.asarray(rep, dtype=np.int64)
        shape = np.broadcast(*env.values()).shape
        return (np.broadcast_to(evaluate(self.forward_thread, env), shape),
                np.broadcast_to(evaluate(self.forward_index[0], env), shape))

    def evaluate_all(self) -> tuple[np.ndarray, np.ndarray]:
        """(thread, slot) of every element and replica, as read-only arrays of shape `input_shape +
        [replicate_size]`."""
        known = _EVALUATED.get(self)
        if known is not None:
            return known
        self._require_static("evaluate_all")
        coords = open_grid(self.input_shape + [self.replicate_size])
        result = tuple(np.ascontiguousarray(a) for a in self.evaluate(*coords[:-1], rep=coords[-1]))
        for a in result:
            a.flags.writeable = False  # shared by every caller through _EVALUATED
        return _EVALUATED.put(self, result)

    # ---- inverse -----------------------------------------------------------------------------------------------------
    def inverse(self, thread: Any = None, local: Any = None, *, return_rep: bool = False,
                padded: bool = False) -> Any:
        """With no arguments: the inverse Layout `(local, thread - first_thread) -> (*x, rep)` (upstream's form).

        With `thread` and `local`: the logical indices held in slot `local` of `thread` (plus the replica number
        if `return_rep`). Needs every (thread, slot) of the covered thread range to hold exactly one element.
        `padded`: a fragment that leaves (thread, slot) pairs unused (40 rows on 32 threads x 2 slots) is inverted as
        if its outermost extent were padded to cover them all, where the forward map stays a bijection on the
        padded shape; the indices of an unused pair are then out of range, so the caller must guard them (as
        fragment_plan does with its range and round-trip condition).
        """
        first = self._first_thread()
        thread_rel = self.forward_thread if first.value == 0 else self.forward_thread - first
        extents = list(self.input_size) + [self.replicate_size]
        box = [self.output_size[0], self.thread_extent - first]
        try:
            out_vars, exprs = _inverse.invert(
                [self.forward_index[0], thread_rel], list(self.forward_vars) + [self.replicate_var], extents, box)
        except _inverse.NotInvertible as err:
            for padded_extents, padded_box in (self._paddings(box) if padded else ()):
                try:
                    out_vars, exprs = _inverse.invert(
                        [self.forward_index[0], thread_rel], list(self.forward_vars) + [self.replicate_var],
                        padded_extents, padded_box)
                    break
                except _inverse.NotInvertible:
                    continue
            else:
                raise LayoutError(f"cannot invert {self!r}: {err}") from None
        if thread is None and local is None:
            return Layout.from_exprs([self.output_size[0], self.thread_extent - first], out_vars, exprs)
        if thread is None or local is None:
            raise LayoutError("Fragment.inverse takes both `thread` and `local`, or neither")
        vmap = {out_vars[0]: as_expr(local), out_vars[1]: as_expr(thread) - first}
        result = [tvm.sym.Analyzer().simplify(substitute(e, vmap)) for e in exprs]
        return result if return_rep else result[:-1]

    def _paddings(self, box: list):
        """(input extents, box) pairs to try where the fragment leaves (thread, slot) pairs unused: one input extent
        grown so that the inputs are exactly as many as the points of the box (40 rows on 32 threads x 2 slots: 64
        rows), or of a box with more threads (rows on thread ranges with a gap between them, [0, 64) and [128, 192):
        the inner extent grown to fill each range's gap, over 256 threads; three such ranges up to 320 over 384: the
        thread count rounded up to a multiple of their stride). The map must be a bijection there; the
        indices of a pair that holds no element are then out of range, and a thread past the box is never asked."""
        extents = [const_int(e) for e in list(self.input_size) + [self.replicate_size]] + [const_int(e) for e in box]
        if any(e is None for e in extents):
            return
        inputs, (slots, threads) = extents[:-2], extents[-2:]
        first_tried = sorted({threads, 1 << (threads - 1).bit_length(), -(-threads // 32) * 32})
        strides = (1 << k for k in range((threads - 1).bit_length()))
        for box_threads in first_tried + sorted({-(-threads // p) * p for p in strides} - set(first_tried)):
            total = slots * box_threads
            for dim in range(len(inputs)):
                rest = int(np.prod(inputs[:dim] + inputs[dim + 1:], dtype=np.int64))
                if total % rest == 0 and total // rest > inputs[dim]:
                    yield inputs[:dim] + [total // rest] + inputs[dim + 1:], [slots, box_threads]

    def is_injective(self) -> bool:
        """No two (element, replica) pairs share a (thread, slot): checked on every pair."""
        known = _INJECTIVE.get(self)
        if known is not None:
            return known
        thread, slot = self.evaluate_all()
        return _INJECTIVE.put(self, all_distinct(thread * int(self.local_size) + slot))

    def is_bijective(self) -> bool:
        """Injective, and every slot of every thread in [first thread, num_threads) is used."""
        thread, _ = self.evaluate_all()
        span = int(self.num_threads) - int(thread.min())
        return self.is_injective() and thread.size == span * int(self.local_size)

    # ---- algebra -----------------------------------------------------------------------------------------------------
    def replicate(self, times: int) -> "Fragment":
        """`times` copies of this fragment on consecutive ranges of `num_threads` threads (replica r of the
        result is replica r % replicate_size of copy r // replicate_size)."""
        if not isinstance(times, int) or times < 1:
            raise LayoutError(f"Fragment.replicate: expected a positive int, got {times!r}")
        rep = new_replicate_var()
        old = self.replicate_size
        thread = substitute(self.forward_thread, {self.replicate_var: rep % old}) + self.thread_extent * (rep // old)
        return Fragment.from_exprs(list(self.input_size), list(self.forward_vars), thread,
                                   list(self.forward_index), replicate=old * times, replicate_var=rep)

    def repeat(self, repeats: Any, repeat_on_thread: bool = False, lower_dim_first: bool = True) -> "Fragment":
        """Tile the fragment `repeats[d]` times along each dim d (as upstream). Tile number n (row-major over
        the tiles, the last dim fastest if `lower_dim_first`, else the first) goes to threads
        `n * num_threads + thread` if `repeat_on_thread`, else to slots `n * local_size + index`."""
        repeats = [repeats] if isinstance(repeats, int) else list(repeats)
        if len(repeats) != self.input_dim or any(not isinstance(r, int) or r < 1 for r in repeats):
            raise LayoutError(f"Fragment.repeat: expected {self.input_dim} positive ints, got {repeats}")
        fvars = make_vars(self.input_dim)
        inner = {v: x % e for v, x, e in zip(self.forward_vars, fvars, self.input_size)}
        tiles = [x // e for x, e in zip(fvars, self.input_size)]
        order = range(self.input_dim - 1, -1, -1) if lower_dim_first else range(self.input_dim)
        number, stride = as_expr(0), 1
        for d in order:
            number, stride = number + tiles[d] * stride, stride * repeats[d]
        thread = substitute(self.forward_thread, inner)
        index = substitute(self.forward_index[0], inner)
        if repeat_on_thread:
            thread = thread + self.thread_extent * number
        else:
            index = index + self.output_size[0] * number
        shape = [e * r for e, r in zip(self.input_size, repeats)]
        return Fragment.from_exprs(shape, fvars, thread, index, replicate=self.replicate_size,
                                   replicate_var=self.replicate_var)

    def expand(self, leading_shape: Any) -> "Layout":
        raise LayoutError("Fragment.expand is not defined (it would not say which thread holds the new "
                          "dimensions); use Fragment.repeat")

    def is_equal(self, other: Layout) -> bool:
        """Same shape and replication, the same slot for every element, and the same set of threads holding it."""
        if type(other) is not Fragment or not self._same_shape(other):
            return False
        if self.replicate_size != other.replicate_size:
            return False
        if not (self.is_static and other.is_static):
            ana = tvm.sym.Analyzer()
            x = list(self.forward_vars)
            return (ana.can_prove_equal(self.forward_index[0], other.index(x, ana))
                    and ana.can_prove_equal(self.forward_thread, other.thread(x, self.replicate_var, ana)))
        t1, s1 = self.evaluate_all()
        t2, s2 = other.evaluate_all()
        return np.array_equal(s1, s2) and np.array_equal(np.sort(t1, axis=-1), np.sort(t2, axis=-1))

    def __repr__(self) -> str:
        args = ", ".join(v.name for v in self.forward_vars)
        rep = f", replicate={self.replicate_size} ({self.replicate_var.name})" if self.replicate_size > 1 else ""
        return (f"Fragment({self.input_shape}, threads={self.num_threads}, local={self.local_size}{rep}: "
                f"({args}) -> thread {self.forward_thread}, slot {self.forward_index[0]})")

    def _first_thread(self) -> Expr:
        dom = self._dom()
        dom[self.replicate_var] = self.replicate_size
        bound = bounds(self.forward_thread, dom)
        return as_expr(bound[0] if bound is not None else 0)


def _fragment_fields(shape: list[Expr], fvars: list[Var], thread: Any, index: Any, rep: Var,
                     replicate: Any) -> tuple:
    replicate = const_int(replicate)
    if replicate is None or replicate < 1:
        raise LayoutError(f"Fragment: replicate must be a positive int, got {replicate!r}")
    thread = as_index_list(thread, "the fragment's thread map")
    if index is not None:
        index = as_index_list(index, "the fragment's index map")
    maps = thread + (index or [])
    extra = (replicate, None if index is None else len(index))
    return reuse_fields("Fragment", shape, [*fvars, rep], maps, extra,
                        lambda: _build_fragment_fields(shape, fvars, thread, index, rep, replicate))


def _build_fragment_fields(shape: list[Expr], fvars: list[Var], thread: list[Expr], index: list[Expr] | None,
                           rep: Var, replicate: int) -> tuple:
    dom = dict(zip(fvars, shape))
    full = {**dom, rep: replicate}
    thread = simplify(thread[0], full)
    inferred = index is None
    if inferred:
        index = [_infer_index(thread, fvars, shape, full)]
    indices = [simplify(e, dom) for e in index]
    for e in indices:
        if _uses(e, rep):
            raise LayoutError(f"Fragment: the local index `{e}` depends on the replica; a slot must be the same "
                              "in every replica")
    if len(indices) > 1:  # a multi-dimensional slot: linearize it row-major
        flat = as_expr(0)
        for k, e in enumerate(indices):
            flat = flat * output_extent(e, dom, f"Fragment index {k}") + e
        indices = [simplify(flat, dom)]
    local = output_extent(indices[0], dom, "Fragment index")
    thread_extent = output_extent(thread, full, "Fragment thread")
    fields = (shape, fvars, indices, [local], rep, replicate, thread, thread_extent)
    if inferred and all_const(shape):
        probe = Fragment.__new__(Fragment)
        probe.__ffi_init__(*fields)
        if not probe.is_injective():
            raise LayoutError(f"Fragment: the local index `{indices[0]}` inferred from the thread map `{thread}` "
                              "gives two elements the same slot; pass forward_index_fn")
    return fields


def _infer_index(thread: Expr, fvars: list[Var], shape: list[Expr], dom: dict) -> Expr:
    """Row-major over (dims in order, each dim's unused digits from the highest): the slot of an element."""
    digits = []
    for var, extent in zip(fvars, shape):
        extent = const_int(extent)
        if extent is None:
            raise LayoutError("Fragment: cannot infer the local index over a symbolic extent; pass forward_index_fn")
        try:
            unused = complement(used_digits(thread, var, dom), extent)
        except DigitError as err:
            raise LayoutError(f"Fragment: cannot infer the local index from the thread map `{thread}` ({err}); "
                              "pass forward_index_fn") from None
        digits.extend((var, d, extent) for d in reversed(unused))
    index = as_expr(0)
    for var, digit, extent in digits:
        index = index * digit.extent + digit.of(var, extent)
    return index


def _uses(expr: Expr, var: Var) -> bool:
    found = []
    tvm_ffi.structural_walk(expr, [(Var, lambda v: found.append(v.same_as(var)))])
    return any(found)


# ---- common fragments ----------------------------------------------------------------------------------------------


def _linear(fvars: Sequence[Var], shape: Sequence[Expr]) -> Expr:
    flat = as_expr(0)
    for var, extent in zip(fvars, shape):
        flat = flat * extent + var
    return flat


def make_fully_replicated_fragment(shape: Any, num_threads: int) -> Fragment:
    """Every one of `num_threads` threads holds the whole tile, in row-major slots."""
    shape = normalize_shape(shape, "make_fully_replicated_fragment")
    fvars, rep = make_vars(len(shape)), new_replicate_var()
    return Fragment.from_exprs(shape, fvars, rep, _linear(fvars, shape), replicate=num_threads, replicate_var=rep)


def make_fully_replicated_layout_fragment(buffer: Any, threads: int) -> Fragment:
    """Upstream's spelling of make_fully_replicated_fragment, taking the buffer."""
    shape, _ = buffer_shape_dtype(buffer, "make_fully_replicated_layout_fragment")
    return make_fully_replicated_fragment(shape, threads)


def make_one_per_thread_fragment(shape: Any, thread_begin: int = 0) -> Fragment:
    """Element k (row-major) in slot 0 of thread `thread_begin + k`: one element per thread of a range."""
    shape = normalize_shape(shape, "make_one_per_thread_fragment")
    fvars = make_vars(len(shape))
    return Fragment.from_exprs(shape, fvars, _linear(fvars, shape) + thread_begin, as_expr(0))
