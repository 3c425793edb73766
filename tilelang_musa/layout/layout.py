"""Layout: an index map from a buffer's logical coordinates to physical coordinates.

    L = T.Layout((64, 32), lambda i, j: [i * 32 + (j ^ (i % 8))])   # as upstream TileLang
    L.map([3, 5])          -> [102]                                # physical coordinates of A[3, 5]
    L.input_shape, L.output_shape, L.inverse(), L.is_equal(other)

A Layout stores its map as TIR expressions over its own input Vars (`forward_vars`, one per logical dimension,
ranging over `input_shape`), simplified under those ranges. `output_shape[k]` is one past the largest value of
output k. Shared-memory layouts (swizzle.py) have one output, the element offset in the buffer's storage.

Layouts are tvm-ffi objects (type key `tl.Layout`), so they can travel inside IR annotations
(`T.annotate_layout`, layout maps) and compare with `tvm_ffi.structural_equal` up to renaming of their Vars.

Why not `tvm.tirx.layout.TileLayout`: it describes strided shards/replicas of axes (CuTe style) plus one
`ComposeLayout` swizzle form; TileLang layouts are arbitrary index expressions written by users as lambdas
(and MUSA's fragments mix shifts, masks and xor), which TileLayout cannot express, so we keep expressions and
invert them ourselves.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import tvm
import tvm_ffi
from tvm_ffi import Object
from tvm_ffi.dataclasses import field, py_class

from ..errors import TileLangError
from . import _inverse
from ._reuse import reuse_fields
from ._expr import (Expr, IntImm, Var, all_const, all_distinct, analyzer_for, as_expr, bounds, const_int, evaluate,
                    fold_bitwise, grid, input_placeholders, make_vars, open_grid, simplify, substitute)


class LayoutError(TileLangError, ValueError):
    """A layout or fragment that cannot be built, inverted or combined as asked (the message names it)."""


def normalize_shape(shape: Any, what: str) -> list[Expr]:
    if isinstance(shape, (int, np.integer, Expr)):
        shape = [shape]
    shape = list(shape)
    if not shape:
        raise LayoutError(f"{what}: the shape must have at least one dimension")
    out = []
    for extent in shape:
        value = const_int(extent)
        if value is not None and value <= 0:
            raise LayoutError(f"{what}: extent {value} in shape {list(shape)} must be positive")
        out.append(as_expr(extent))
    return out


def as_index_list(value: Any, what: str) -> list[Expr]:
    if isinstance(value, (list, tuple, tvm_ffi.Array)):
        return [as_expr(v) for v in value]
    try:
        return [as_expr(value)]
    except TypeError:
        raise LayoutError(f"{what} must return an index expression or a list of them, got {value!r}") from None


def shape_value(extent: Expr) -> int | Expr:
    value = const_int(extent)
    return value if value is not None else extent


def output_extent(expr: Expr, dom: dict, what: str) -> Expr:
    """One past the largest value of `expr` over `dom` (an IntImm when the shapes are constant)."""
    if not all_const(dom.values()):  # symbolic shapes: the analyzer's affine bound, an expression
        ana = analyzer_for(dom)
        return ana.simplify(ana.int_set(expr).max_value + 1)
    bound = bounds(expr, dom)
    if bound is None:
        raise LayoutError(f"{what} `{expr}` cannot be bounded over its input shape")
    lo, hi = bound
    if lo < 0:
        raise LayoutError(f"{what} `{expr}` takes negative values (down to {lo})")
    return as_expr(hi + 1)


@py_class("tl.Layout", frozen=True, init=False, repr=False)
class Layout(Object):
    """An index map `input_shape -> output_shape` (see the module docstring)."""

    input_size: tvm_ffi.Array
    forward_vars: tvm_ffi.Array = field(structural_eq="def-simple")
    forward_index: tvm_ffi.Array
    output_size: tvm_ffi.Array

    def __init__(self, shape: Sequence[Any], forward_fn: Callable[..., Any]):
        """`shape`: logical extents; `forward_fn(*index_vars)` returns the physical index (or a list of them)."""
        shape = normalize_shape(shape, "T.Layout")
        fvars = make_vars(len(shape))
        index = as_index_list(forward_fn(*fvars), "T.Layout's forward_fn")
        self.__ffi_init__(*_layout_fields(shape, fvars, index))

    @classmethod
    def from_exprs(cls, shape: Sequence[Any], forward_vars: Sequence[Var], forward_index: Sequence[Any]) -> "Layout":
        """Build from expressions over `forward_vars` (one Var per dimension of `shape`)."""
        shape = normalize_shape(shape, "Layout")
        if len(forward_vars) != len(shape):
            raise LayoutError(f"Layout: {len(forward_vars)} index vars for a {len(shape)}-d shape")
        obj = cls.__new__(cls)
        obj.__ffi_init__(*_layout_fields(shape, list(forward_vars), as_index_list(list(forward_index), "Layout")))
        return obj

    # ---- shapes -------------------------------------------------------------------------------------------------
    @property
    def input_shape(self) -> list[int | Expr]:
        return [shape_value(e) for e in self.input_size]

    @property
    def output_shape(self) -> list[int | Expr]:
        return [shape_value(e) for e in self.output_size]

    @property
    def input_dim(self) -> int:
        return len(self.input_size)

    @property
    def output_dim(self) -> int:
        return len(self.forward_index)

    @property
    def is_static(self) -> bool:
        return all_const(self.input_size)

    def size(self) -> int:
        """Number of logical elements."""
        self._require_static("size")
        return int(np.prod(self.input_shape, dtype=np.int64))

    # upstream TileLang spellings
    def get_input_shape(self) -> list[int | Expr]:
        return self.input_shape

    def get_output_shape(self) -> list[int | Expr]:
        return self.output_shape

    # Upstream's accessors speak of shared input placeholders (_expr.input_placeholders): the same Vars in every
    # layout, so two layouts' indices compare (`can_prove_equal(a.get_linearized_forward_index(), b...)`).
    def _to_placeholders(self, expr: Expr) -> Expr:
        return substitute(expr, dict(zip(self.forward_vars, input_placeholders(len(self.forward_vars)))))

    def get_forward_vars(self) -> list[Var]:
        return input_placeholders(len(self.forward_vars))

    def get_forward_index(self) -> list[Expr]:
        return [self._to_placeholders(e) for e in self.forward_index]

    def get_linearized_forward_index(self) -> Expr:
        """The output index as one row-major offset into the output shape (a 1-d layout's index as it is)."""
        offset: Any = 0
        for index, extent in zip(self.forward_index, self.output_shape):
            offset = offset * extent + index
        return self._to_placeholders(simplify(offset, dict(zip(self.forward_vars, self.input_size))))

    # ---- applying ------------------------------------------------------------------------------------------------
    def map(self, indices: Sequence[Any], analyzer: tvm.sym.Analyzer | None = None) -> list[Expr]:
        """The physical coordinates of logical `indices` (ints or expressions), simplified."""
        return [self._apply(e, indices, analyzer, "map") for e in self.forward_index]

    def map_forward_index(self, indices: Sequence[Any]) -> list[Expr]:
        return self.map(indices)

    def __call__(self, *indices: Any) -> list[Expr]:
        return self.map(indices)

    def evaluate(self, *coords: Any) -> list[np.ndarray]:
        """The outputs at integer coordinates (ints or numpy arrays, broadcast together), as int64 arrays."""
        env = self._env(coords, "evaluate")
        shape = np.broadcast(*env.values()).shape
        return [np.broadcast_to(evaluate(e, env), shape) for e in self.forward_index]

    # ---- algebra ---------------------------------------------------------------------------------------------------
    def inverse(self) -> "Layout":
        """The inverse layout `output_shape -> input_shape`, for a bijective layout.

        Handles affine maps (any extents) and GF(2)-linear ones (power-of-two extents: swizzles, lane formulas);
        raises LayoutError naming the layout otherwise, or two colliding inputs if it is not a bijection.
        """
        try:
            out_vars, exprs = _inverse.invert(list(self.forward_index), list(self.forward_vars),
                                              list(self.input_size), list(self.output_size))
        except _inverse.NotInvertible as err:
            raise LayoutError(f"cannot invert {self!r}: {err}") from None
        return Layout.from_exprs(list(self.output_size), out_vars, exprs)

    def is_bijective(self) -> bool:
        """True if the layout is a bijection onto its output box (checked on every element)."""
        self._require_static("is_bijective")
        outs = self.evaluate(*open_grid(self.input_shape))
        flat = np.zeros(self.size(), dtype=np.int64)
        for value, extent in zip(outs, self.output_shape):
            flat = flat * extent + value.reshape(-1)
        return flat.size == int(np.prod(self.output_shape, dtype=np.int64)) and all_distinct(flat)

    def first_collision(self) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        """Two input coordinates the layout sends to the same output (the first in row-major order), or None if it
        is injective."""
        self._require_static("first_collision")
        coords = grid(self.input_shape)
        flat = np.zeros(self.size(), dtype=np.int64)
        for value, extent in zip(self.evaluate(*coords), self.output_shape):
            flat = flat * int(extent) + np.asarray(value, dtype=np.int64).reshape(-1)
        _, first, counts = np.unique(flat, return_index=True, return_counts=True)
        if counts.max(initial=1) <= 1:
            return None
        target = flat[first[np.argmax(counts > 1)]]
        a, b = np.flatnonzero(flat == target)[:2]
        shape = [int(e) for e in self.input_shape]
        return tuple(int(x) for x in np.unravel_index(a, shape)), tuple(int(x) for x in np.unravel_index(b, shape))

    def is_equal(self, other: "Layout") -> bool:
        """Same input shape and the same physical coordinates for every logical element."""
        if type(other) is not type(self) or not self._same_shape(other):
            return False
        if self.output_dim != other.output_dim:
            return False
        if self.is_static:
            coords = open_grid(self.input_shape)
            return all(np.array_equal(a, b) for a, b in zip(self.evaluate(*coords), other.evaluate(*coords)))
        ana = analyzer_for(dict(zip(self.forward_vars, self.input_size)))
        theirs = other.map(list(self.forward_vars), ana)
        return all(ana.can_prove_equal(a, b) for a, b in zip(self.forward_index, theirs))

    def repeat(self, dim: int, factor: int) -> "Layout":
        """Tile the layout `factor` times along input `dim`; a new leading output gives the tile number:
        `L'(.., i, ..) = [i // extent] + L(.., i % extent, ..)`."""
        dim = self._dim(dim, "repeat")
        if not isinstance(factor, int) or factor < 1:
            raise LayoutError(f"Layout.repeat: factor must be a positive int, got {factor!r}")
        if factor == 1:
            return self
        extent = self.input_size[dim]
        fvars = make_vars(self.input_dim)
        inner = list(fvars)
        inner[dim] = fvars[dim] % extent
        shape = list(self.input_size)
        shape[dim] = extent * factor
        return Layout.from_exprs(shape, fvars, [fvars[dim] // extent] + self.map(inner))

    def expand(self, leading_shape: Any) -> "Layout":
        """Prepend logical dimensions that pass through unchanged: `[l.., *x] -> [l.., *L(x)]` (stage dims)."""
        if isinstance(leading_shape, (list, tuple)) and not leading_shape:
            return self
        leading = normalize_shape(leading_shape, "Layout.expand")
        fvars = make_vars(len(leading) + self.input_dim)
        return Layout.from_exprs(leading + list(self.input_size), fvars,
                                 fvars[:len(leading)] + self.map(fvars[len(leading):]))

    def __repr__(self) -> str:
        args = ", ".join(v.name for v in self.forward_vars)
        body = ", ".join(str(e) for e in self.forward_index)
        return f"Layout({self.input_shape} -> {self.output_shape}: ({args}) -> [{body}])"

    # ---- helpers ---------------------------------------------------------------------------------------------------
    def _apply(self, expr: Expr, indices: Sequence[Any], analyzer, what: str, extra: dict | None = None) -> Expr:
        indices = list(indices)
        if len(indices) != self.input_dim:
            raise LayoutError(f"{type(self).__name__}.{what}: {len(indices)} indices for the "
                              f"{self.input_dim}-d shape {self.input_shape}")
        vmap = {v: as_expr(x) for v, x in zip(self.forward_vars, indices)}
        vmap.update(extra or {})
        if all(isinstance(x, IntImm) for x in vmap.values()):
            return as_expr(int(evaluate(expr, {v: int(x.value) for v, x in vmap.items()})))
        analyzer = analyzer or tvm.sym.Analyzer()
        out = analyzer.simplify(substitute(expr, vmap))
        folded = fold_bitwise(out)
        return out if folded.same_as(out) else analyzer.simplify(folded)

    def _env(self, coords: Sequence[Any], what: str) -> dict:
        if len(coords) != self.input_dim:
            raise LayoutError(f"{type(self).__name__}.{what}: {len(coords)} coordinates for the "
                              f"{self.input_dim}-d shape {self.input_shape}")
        return {v: np.asarray(c, dtype=np.int64) for v, c in zip(self.forward_vars, coords)}

    def _dom(self) -> dict:
        return dict(zip(self.forward_vars, self.input_size))

    def _dim(self, dim: int, what: str) -> int:
        if not isinstance(dim, int) or not -self.input_dim <= dim < self.input_dim:
            raise LayoutError(f"{type(self).__name__}.{what}: dim {dim!r} out of range for the "
                              f"{self.input_dim}-d shape {self.input_shape}")
        return dim % self.input_dim

    def _same_shape(self, other: "Layout") -> bool:
        if self.input_dim != other.input_dim:
            return False
        return all(tvm_ffi.structural_equal(a, b) or tvm.sym.Analyzer().can_prove_equal(a, b)
                   for a, b in zip(self.input_size, other.input_size))

    def _require_static(self, what: str) -> None:
        if not self.is_static:
            raise LayoutError(f"{type(self).__name__}.{what} needs a constant shape, got {self.input_shape}")


def _layout_fields(shape: list[Expr], fvars: list[Var], index: list[Expr]) -> tuple:
    def build() -> tuple:
        dom = dict(zip(fvars, shape))
        simplified = [simplify(e, dom) for e in index]
        return shape, fvars, simplified, [output_extent(e, dom, f"Layout output {k}") for k, e in enumerate(simplified)]

    return reuse_fields("Layout", shape, fvars, index, None, build)
