"""`tilelang.layout.cute`: CuTe's layout algebra (upstream TileLang 0.1.13's module), over plain Python values.

A CuTe layout is a pair of congruent nested tuples, shape and stride: coordinate c maps to sum(c_i * stride_i),
a 1-D index first split colexicographically (mode 0 fastest). The algebra (coalesce, composition, complement,
inverses, divide and products) is hardware-independent index arithmetic, so it is all here. Its bridge to
TileLang-MUSA's layouts: `Layout.to_tilelang()` gives a `tilelang.layout.Layout` (the index map a buffer's
`T.annotate_layout` takes, on any arch), `Layout.from_tilelang(layout)` recovers the CuTe form of an affine
one (None when it is not affine, e.g. swizzled).

IntTuples are plain Python values: an int, a PrimExpr (a run-time extent: evaluation and `size` accept it, the
algebra that must divide extents needs them static and says so), a `ScaledBasis` (a stride that moves along one
axis of a coordinate tuple, as `make_identity_layout` builds), or a tuple of IntTuples. `from_python` gives its
tuples as `ArithmeticTuple`s, tuples with CuTe's IntTuple addition (component-wise, a basis counting as the tuple
with its value at its axis); `IntTuple.parse` and `Layout.parse` read the text `str()` writes. Upstream's FFI node
classes for them (`IntTuple`, `IntTupleConst`, ...), the swizzle recovery `ComposedLayout.from_tilelang`, the
hierarchical recovery and `restrict` belong to upstream's C++ layout inference for NVIDIA's TMA / tcgen05
descriptors; MUSA's shared-memory swizzles are described by `tilelang.layout.make_sqmma_swizzled_layout` and
friends instead. Using one of those names raises UnsupportedError naming it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, Union

from tvm import tirx
from ._expr import Expr as PrimExpr

from ..errors import UnsupportedError
from .layout import Layout as TileLangLayout, LayoutError

IntTupleLike = Union[int, PrimExpr, "ScaledBasis", tuple]


# ---------------------------------------------------------------------------------------------------- IntTuples
class ScaledBasis:
    """`value` along axis `mode` (a path into a nested coordinate tuple: (1,) is axis 1, (1, 0) axis 0 of axis 1)."""

    def __init__(self, value: Any, mode: int | Sequence[int]):
        self.value = value
        self.mode = (int(mode),) if isinstance(mode, int) else tuple(int(m) for m in mode)

    def __add__(self, other: Any) -> Any:
        return _add(self, other)

    def __radd__(self, other: Any) -> Any:
        return _add(other, self)

    def __mul__(self, other: Any) -> "ScaledBasis":
        if isinstance(other, (tuple, list, ScaledBasis)):
            raise LayoutError(f"cute: a ScaledBasis times {other!r}: only a scalar scales a basis")
        return ScaledBasis(self.value * other, self.mode)

    __rmul__ = __mul__

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ScaledBasis) and other.mode == self.mode and _same(other.value, self.value)

    def __hash__(self) -> int:
        return hash(("E", self.mode, str(self.value)))

    def __repr__(self) -> str:  # CuTe's spelling: the innermost axis first, E<1,0> is 1@0@1
        return "@".join([str(self.value), *(str(m) for m in reversed(self.mode))])


def E(mode: int | Sequence[int]) -> ScaledBasis:
    """The unit stride along axis `mode`."""
    return ScaledBasis(1, mode)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, PrimExpr) or isinstance(b, PrimExpr):
        import tvm

        import tvm_ffi

        return tvm_ffi.structural_equal(tirx.const(a, "int32") if isinstance(a, int) else a,
                                        tirx.const(b, "int32") if isinstance(b, int) else b)
    return a == b


def _is_tuple(t: Any) -> bool:
    return isinstance(t, (tuple, list))


def _canonical(value: IntTupleLike) -> Any:
    """The canonical IntTuple of a Python value: lists become (plain) tuples, constant PrimExprs ints."""
    if _is_tuple(value):
        return tuple(_canonical(v) for v in value)
    if isinstance(value, bool):
        raise LayoutError(f"cute: {value!r} is not an IntTuple")
    if isinstance(value, int):
        return int(value)
    if isinstance(value, tirx.IntImm):
        return int(value.value)
    if isinstance(value, (PrimExpr, ScaledBasis)):
        return value
    raise LayoutError(f"cute: cannot make an IntTuple of {value!r} (an int, a PrimExpr, a ScaledBasis or a tuple)")


def from_python(value: IntTupleLike) -> Any:
    """The canonical IntTuple of a Python value, whose tuples add as CuTe's IntTuples do (`ArithmeticTuple`)."""
    return _arithmetic(_canonical(value))


def to_python(value: IntTupleLike) -> Any:
    """The canonical IntTuple as plain Python values (tuples, ints, PrimExprs, ScaledBases)."""
    return _canonical(value)


class ArithmeticTuple(tuple):
    """A tuple IntTuple with CuTe's arithmetic: `+` adds component-wise, the shorter operand zero-padded (so
    `(2, 3) + (10,)` is `(12, 3)`), and adding 0 is the identity. A ScaledBasis added to it (or to another basis)
    counts as the tuple with its value at its axis (CuTe's as_arithmetic_tuple: `1@0 + 1@1` is `(1, 1)`)."""

    def __add__(self, other: Any) -> Any:
        return _add(self, other)

    def __radd__(self, other: Any) -> Any:
        return _add(other, self)


def _arithmetic(value: Any) -> Any:
    return ArithmeticTuple(_arithmetic(v) for v in value) if _is_tuple(value) else value


def _as_arithmetic_tuple(value: Any) -> Any:
    if isinstance(value, ScaledBasis):
        return _arithmetic(_zeros_for_none(_add_at(None, value.mode, value.value)))
    return value


def _add(a: Any, b: Any) -> Any:
    a, b = _as_arithmetic_tuple(_canonical(a)), _as_arithmetic_tuple(_canonical(b))
    if _is_tuple(a) and _is_tuple(b):
        width = max(len(a), len(b))
        a, b = tuple(a) + (0,) * (width - len(a)), tuple(b) + (0,) * (width - len(b))
        return ArithmeticTuple(_add(x, y) for x, y in zip(a, b))
    for x, y in ((a, b), (b, a)):
        if isinstance(y, int) and y == 0:
            return _arithmetic(x)
    if _is_tuple(a) or _is_tuple(b):
        raise LayoutError(f"cute: cannot add {_text(a)} and {_text(b)} (a tuple adds a tuple, or 0)")
    return a + b


def flatten_to_tuple(value: IntTupleLike) -> tuple:
    if not _is_tuple(value):
        return (value,)
    return tuple(leaf for v in value for leaf in flatten_to_tuple(v))


def product(shape: IntTupleLike) -> Any:
    result: Any = 1
    for leaf in flatten_to_tuple(_canonical(shape)):
        result = result * leaf
    return result


def congruent(a: IntTupleLike, b: IntTupleLike) -> bool:
    """Same nesting (profile), whatever the leaves."""
    a, b = _canonical(a), _canonical(b)
    if _is_tuple(a) and _is_tuple(b):
        return len(a) == len(b) and all(congruent(x, y) for x, y in zip(a, b))
    return not _is_tuple(a) and not _is_tuple(b)


def compatible(a: IntTupleLike, b: IntTupleLike) -> bool:
    """Every coordinate of shape `a` is one of shape `b` (a is a leaf of the same size as b, or a tuple like b's,
    mode by mode). Directional, as CuTe's; symbolic sizes compare structurally."""
    a, b = _canonical(a), _canonical(b)
    if _is_tuple(a):
        return _is_tuple(b) and len(a) == len(b) and all(compatible(x, y) for x, y in zip(a, b))
    size_b = product(b)
    if isinstance(a, int) and isinstance(size_b, int):
        return a == size_b
    import tvm

    return bool(tvm.sym.Analyzer().can_prove_equal(_expr(a), _expr(size_b)))


def _expr(v: Any) -> PrimExpr:
    return tirx.const(v, "int32") if isinstance(v, int) else v


def _static(value: Any, what: str) -> int:
    if isinstance(value, tirx.IntImm):
        return int(value.value)
    if not isinstance(value, int):
        raise LayoutError(f"cute.{what} needs static extents and strides; got {value!r}")
    return value


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# ------------------------------------------------------------------------------------------------------- Layout
class Layout:
    """A CuTe layout: `Layout(shape, stride)` (both nested tuples of the same profile, or scalars)."""

    def __init__(self, shape: IntTupleLike, stride: IntTupleLike):
        self._shape, self._stride = _canonical(shape), _canonical(stride)
        if not congruent(self._shape, self._stride):
            raise LayoutError(f"cute.Layout: shape {self._shape} and stride {self._stride} are not congruent")

    @property
    def shape(self) -> Any:
        return self._shape

    @property
    def stride(self) -> Any:
        return self._stride

    def __getitem__(self, index: int) -> "Layout":
        if not _is_tuple(self._shape):
            if index != 0:
                raise LayoutError(f"cute.Layout[{index}]: a rank-1 layout has mode 0 only")
            return self
        return Layout(self._shape[index], self._stride[index])

    def __len__(self) -> int:
        return rank(self)

    def __call__(self, coord: IntTupleLike) -> Any:
        """The image of `coord`: a 1-D index (split colexicographically over the whole shape) or a (nested)
        coordinate tuple whose leaves may be indices into the sub-shape they stand for. Strides that are ints
        give an offset; ScaledBasis strides give a coordinate tuple."""
        terms = []
        _accumulate(_canonical(coord), self._shape, self._stride, terms)
        return _sum_terms(terms)

    def with_shape(self, shape: IntTupleLike) -> "Layout":
        """The same function reshaped: `composition(self, make_layout(shape))`."""
        return composition(self, make_layout(shape))

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Layout) and other._shape == self._shape and other._stride == self._stride

    def __hash__(self) -> int:
        return hash(str(self))

    def __repr__(self) -> str:
        return f"{_text(self._shape)}:{_text(self._stride)}"

    __str__ = __repr__

    @staticmethod
    def parse(text: str) -> "Layout":
        """The inverse of `str(layout)` for int strides: `"(2,(3,4)):(1,(2,6))"`."""
        depth = 0
        for at, char in enumerate(text):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if char == ":" and depth == 0:
                try:
                    return Layout(parse_int_tuple(text[:at]), parse_int_tuple(text[at + 1:]))
                except LayoutError as error:
                    raise LayoutError(f"cute.Layout.parse: {text!r} is not 'shape:stride' of ints and "
                                      f"bases ({error})") from error
        raise LayoutError(f"cute.Layout.parse: {text!r} has no ':' between shape and stride")

    @staticmethod
    def from_tilelang(layout: TileLangLayout) -> "Layout | None":
        """The CuTe layout of an affine `tilelang.layout.Layout` of static shape: one mode per input dimension
        (shape: its extent, stride: the linearized output's step along it). None when the map is not affine
        (a swizzle, a padding that wraps)."""
        shape = [_static(e, "Layout.from_tilelang") for e in layout.input_shape]
        import numpy as np

        coords = np.indices(shape).reshape(len(shape), -1)
        linear = TileLangLayout.from_exprs(layout.input_shape, layout.get_forward_vars(),
                                           [layout.get_linearized_forward_index()])
        (offsets,) = linear.evaluate(*coords)
        offsets = np.asarray(offsets, dtype=np.int64).reshape(-1)
        base = int(offsets[0])
        strides = [int(offsets[int(np.ravel_multi_index(tuple(1 if k == d else 0 for k in range(len(shape))),
                                                        shape))]) - base if shape[d] > 1 else 0
                   for d in range(len(shape))]
        if base != 0 or not np.array_equal(offsets, np.asarray(strides, dtype=np.int64) @ coords):
            return None
        return Layout(tuple(shape), tuple(strides)) if len(shape) > 1 else Layout(shape[0], strides[0])

    @staticmethod
    def from_tilelang_hierarchical(layout: TileLangLayout) -> Any:
        _unsupported("Layout.from_tilelang_hierarchical")

    def to_tilelang(self) -> TileLangLayout:
        """A `tilelang.layout.Layout` over the top-level modes (extents: their sizes) computing this layout's
        offset (int strides) or coordinate tuple (ScaledBasis strides)."""
        shape = [size(self[i]) for i in range(rank(self))]

        def forward(*coords: Any) -> list:
            image = self(tuple(coords)) if len(coords) > 1 else self(coords[0])
            return list(image) if _is_tuple(image) else [image]

        return TileLangLayout(shape, forward)


def parse_int_tuple(text: str) -> Any:
    """The inverse of an IntTuple's text: ints, bases `v@m0@m1` (innermost axis first) and nested tuples."""
    tokens = re.findall(r"\(|\)|,|[^(),\s]+", text)
    position = 0

    def atom(token: str) -> Any:
        try:
            parts = [int(p) for p in token.split("@")]
        except ValueError as error:
            raise LayoutError(f"cute: {token!r} in {text!r} is not an int or a basis v@m") from error
        return parts[0] if len(parts) == 1 else ScaledBasis(parts[0], tuple(reversed(parts[1:])))

    def value() -> Any:
        nonlocal position
        if position >= len(tokens):
            raise LayoutError(f"cute: {text!r} ends early")
        token = tokens[position]
        position += 1
        if token != "(":
            if token in (")", ","):
                raise LayoutError(f"cute: unexpected {token!r} in {text!r}")
            return atom(token)
        items = [value()]
        while position < len(tokens) and tokens[position] == ",":
            position += 1
            items.append(value())
        if position >= len(tokens) or tokens[position] != ")":
            raise LayoutError(f"cute: {text!r} has an unclosed '('")
        position += 1
        return tuple(items)

    result = value()
    if position != len(tokens):
        raise LayoutError(f"cute: {text!r} has text after its IntTuple")
    return result


def _text(t: Any) -> str:
    return f"({','.join(_text(x) for x in t)})" if _is_tuple(t) else str(t)


def _split_index(index: Any, shape: Any) -> tuple:
    """A 1-D index over `shape` (a tuple) as one index per mode, mode 0 fastest; the last mode takes the rest."""
    parts = []
    for k, mode in enumerate(shape):
        extent = product(mode)
        if k == len(shape) - 1:
            parts.append(index)
        elif isinstance(index, int) and isinstance(extent, int):
            parts.append(index % extent)
            index //= extent
        else:
            parts.append(tirx.floormod(_expr(index), _expr(extent)))
            index = tirx.floordiv(_expr(index), _expr(extent))
    return tuple(parts)


def _accumulate(coord: Any, shape: Any, stride: Any, terms: list) -> None:
    if _is_tuple(coord):
        if not _is_tuple(shape) or len(coord) != len(shape):
            raise LayoutError(f"cute.Layout: coordinate {_text(coord)} does not fit shape {_text(shape)}")
        for c, s, d in zip(coord, shape, stride):
            _accumulate(c, s, d, terms)
    elif _is_tuple(shape):
        for c, s, d in zip(_split_index(coord, shape), shape, stride):
            _accumulate(c, s, d, terms)
    else:
        terms.append(ScaledBasis(coord * stride.value, stride.mode) if isinstance(stride, ScaledBasis)
                     else coord * stride)


def _sum_terms(terms: list) -> Any:
    plain = [t for t in terms if not isinstance(t, ScaledBasis)]
    bases = [t for t in terms if isinstance(t, ScaledBasis)]
    total: Any = 0
    for t in plain:
        total = t if isinstance(total, int) and total == 0 else total + t
    if not bases:
        return total
    if plain and not (isinstance(total, int) and total == 0):
        raise LayoutError("cute.Layout: a layout mixing int and ScaledBasis strides has no single image")
    result: Any = None
    for basis in bases:
        result = _add_at(result, basis.mode, basis.value)
    return _zeros_for_none(result)


def _add_at(t: Any, path: tuple, value: Any) -> Any:
    """`t` (a coordinate tuple, None where nothing was added yet) plus `value` at nested position `path`."""
    if not path:
        return value if t is None else t + value
    items = list(t) if t is not None else []
    items += [None] * (path[0] + 1 - len(items))
    items[path[0]] = _add_at(items[path[0]], path[1:], value)
    return tuple(items)


def _zeros_for_none(t: Any) -> Any:
    return tuple(_zeros_for_none(x) for x in t) if _is_tuple(t) else 0 if t is None else t


# ---------------------------------------------------------------------------------------------------- makers
def _compact(shape: Any, acc: list, reverse: bool) -> Any:
    if _is_tuple(shape):
        order = range(len(shape) - 1, -1, -1) if reverse else range(len(shape))
        out: list = [None] * len(shape)
        for i in order:
            out[i] = _compact(shape[i], acc, reverse)
        return tuple(out)
    if isinstance(shape, int) and shape == 1:
        return 0  # a unit mode never moves (CuTe's compact strides)
    stride = acc[0]
    acc[0] = acc[0] * shape
    return stride


def make_column_major_layout(shape: IntTupleLike) -> Layout:
    shape = _canonical(shape)
    return Layout(shape, _compact(shape, [1], reverse=False))


def make_row_major_layout(shape: IntTupleLike) -> Layout:
    shape = _canonical(shape)
    return Layout(shape, _compact(shape, [1], reverse=True))


def make_identity_layout(shape: IntTupleLike) -> Layout:
    """Coordinate -> itself: every leaf's stride is the unit basis along its own (nested) axis."""
    def strides(s: Any, path: tuple) -> Any:
        return tuple(strides(x, path + (i,)) for i, x in enumerate(s)) if _is_tuple(s) else E(path)

    shape = _canonical(shape)
    return Layout(shape, strides(shape, ()) if _is_tuple(shape) else E(0))


def make_layout(shape: Any, stride: IntTupleLike | None = None) -> Layout:
    """`make_layout(shape, stride)`; `make_layout(shape)`: column-major; `make_layout([l0, l1, ...])`: the layouts
    as the modes of one."""
    if stride is None and _is_tuple(shape) and shape and all(isinstance(x, Layout) for x in shape):
        return Layout(tuple(x.shape for x in shape), tuple(x.stride for x in shape))
    if isinstance(shape, Layout):
        return shape if stride is None else _bad_stride()
    if stride is None:
        return make_column_major_layout(shape)
    return Layout(shape, stride)


def _bad_stride() -> Layout:
    raise LayoutError("cute.make_layout(layout, stride): a Layout already has its strides")


# ------------------------------------------------------------------------------------------------ queries
def rank(layout: Layout) -> int:
    return len(layout.shape) if _is_tuple(layout.shape) else 1


def size(layout: Any) -> Any:
    if isinstance(layout, ComposedLayout):
        layout = layout.layout
    return product(layout.shape if isinstance(layout, Layout) else layout)


def flatten(layout: Layout) -> Layout:
    shape, stride = flatten_to_tuple(layout.shape), flatten_to_tuple(layout.stride)
    return Layout(shape, stride) if len(shape) > 1 else Layout(shape[0], stride[0])


def _modes(layout: Layout, what: str, symbolic_strides: bool = False) -> list[tuple[int, Any]]:
    """The (extent, stride) leaves, static ints; with `symbolic_strides`, a stride may be a PrimExpr or a
    ScaledBasis."""
    def stride(d: Any) -> Any:
        if symbolic_strides and (isinstance(d, ScaledBasis) or isinstance(d, PrimExpr) and not isinstance(
                d, tirx.IntImm)):
            return d
        return _static(d, what)

    return [(_static(s, what), stride(d))
            for s, d in zip(flatten_to_tuple(layout.shape), flatten_to_tuple(layout.stride))]


def _provably_equal(a: Any, b: Any) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, ScaledBasis) or isinstance(b, ScaledBasis):
        return a == b
    import tvm

    return bool(tvm.sym.Analyzer().can_prove_equal(_expr(a), _expr(b)))


def _of_modes(modes: list[tuple[int, int]]) -> Layout:
    if not modes:
        return Layout(1, 0)
    if len(modes) == 1:
        return Layout(*modes[0])
    return Layout(tuple(s for s, _ in modes), tuple(d for _, d in modes))


def cosize(layout: Layout) -> Any:
    """1 + sum((extent - 1) * |stride|) over the modes (CuTe's, a run-time stride's |stride| as `abs`); the
    product of `coshape` for ScaledBasis strides."""
    last = layout(size(layout) - 1)
    if _is_tuple(last) or isinstance(last, ScaledBasis):
        return product(coshape(layout))
    total: Any = 1
    for extent, stride in zip(flatten_to_tuple(layout.shape), flatten_to_tuple(layout.stride)):
        total = total + (extent - 1) * (abs(stride) if isinstance(stride, int) else tirx.abs(_expr(stride)))
    return total


def coshape(layout: Layout) -> Any:
    """The extent of the image: per axis for ScaledBasis strides, else `cosize`."""
    last = layout(size(layout) - 1)
    if _is_tuple(last):
        def plus_one(t: Any) -> Any:
            return tuple(plus_one(x) for x in t) if _is_tuple(t) else t + 1

        return plus_one(last)
    return last + 1


# ---------------------------------------------------------------------------------------------- the algebra
def coalesce(layout: Layout, max_extent: int | None = None) -> Layout:
    """The same function with the fewest modes: unit modes dropped, mode k+1 merged into mode k where
    stride[k+1] == extent[k] * stride[k]. `max_extent` caps a merged mode's extent."""
    merged: list[tuple[int, int]] = []
    for s, d in _modes(layout, "coalesce", symbolic_strides=True):  # run-time strides merge where provable
        if s == 1:
            continue
        if merged:
            ps, pd = merged[-1]
            if _provably_equal(d, ps * pd) and (max_extent is None or ps * s <= max_extent):
                merged[-1] = (ps * s, pd)
                continue
        merged.append((s, d))
    return _of_modes(merged)


def filter(layout: Layout) -> Layout:  # noqa: A001 - CuTe's name
    """`coalesce` after dropping the modes of stride 0 (broadcasts) and of extent 1."""
    return coalesce(_of_modes([(s, d) for s, d in _modes(layout, "filter", symbolic_strides=True)
                               if not (isinstance(d, int) and d == 0) and s != 1]))


def composition(lhs: Layout, rhs: Any) -> Layout:
    """`lhs ∘ rhs`: c -> lhs(rhs(c)), with rhs's shape. `rhs` may be a Layout, a shape (column-major), or a tuple
    of those, one per mode of lhs (by-mode composition)."""
    if _is_tuple(rhs) and any(isinstance(r, Layout) or _is_tuple(r) for r in rhs):
        if len(rhs) > rank(lhs):
            raise LayoutError(f"cute.composition: a tiler of {len(rhs)} modes for a layout of rank {rank(lhs)}")
        parts = [composition(lhs[i], r) for i, r in enumerate(rhs)] + [lhs[i] for i in range(len(rhs), rank(lhs))]
        return make_layout(parts)
    if not isinstance(rhs, Layout):
        rhs = make_layout(rhs)
    if _is_tuple(rhs.shape):
        return make_layout([composition(lhs, rhs[i]) for i in range(rank(rhs))])
    if isinstance(rhs.stride, ScaledBasis):  # k@i walks lhs's axis i (CuTe's basis_get): lhs[i] o (extent:k)
        for axis in rhs.stride.mode:
            lhs = lhs[axis]
        return composition(lhs, Layout(rhs.shape, rhs.stride.value))
    extent, step = _static(rhs.shape, "composition"), _static(rhs.stride, "composition")
    if step == 0:
        return Layout(extent, 0)
    modes = _modes(coalesce(lhs), "composition", symbolic_strides=True)  # lhs's strides only scale
    out: list[tuple[int, Any]] = []
    for k, (s, d) in enumerate(modes):
        if extent == 1:
            break
        if k == len(modes) - 1:  # the last mode of lhs extends as far as rhs needs
            out.append((extent, _scaled(d, step)))
            extent = 1
            break
        if step >= s:
            if step % s:
                raise LayoutError(f"cute.composition({lhs}, {rhs}): stride {step} does not divide by extent {s}")
            step //= s
            continue
        if s % step:
            raise LayoutError(f"cute.composition({lhs}, {rhs}): extent {s} does not divide by stride {step}")
        available = s // step
        take = min(available, extent)
        if extent % take:
            raise LayoutError(f"cute.composition({lhs}, {rhs}): extent {extent} does not divide by {take}")
        out.append((take, _scaled(d, step)))
        extent //= take
        step = 1
    return coalesce(_of_modes(out))


def _scaled(stride: Any, factor: int) -> Any:
    """`stride * factor`, a run-time stride left as it is when the factor is 1."""
    return stride if factor == 1 else stride * factor


def complement(layout: Layout, cotarget: int) -> Layout:
    """The layout of the offsets in [0, cotarget) that `layout` does not reach, ordered: together
    (`make_layout([layout, complement])`) they cover [0, cotarget) once."""
    cotarget = _static(cotarget, "complement")
    kept = [(s, d) for s, d in _modes(filter(layout), "complement", symbolic_strides=True)
            if not (isinstance(d, int) and d == 0)]
    if any(not isinstance(d, int) for _, d in kept):
        return _complement_run_time_stride(layout, kept, cotarget)
    out, reached = [], 1
    for d, s in sorted((d, s) for s, d in kept):
        # CuTe divides without asking for divisibility: the offsets between reached and d that are not a multiple
        # of reached are left out, as CuTe leaves them
        if d // reached == 0:
            raise LayoutError(f"cute.complement({layout}, {cotarget}): the layout is not injective (stride {d} "
                              f"inside the {reached} offsets the smaller strides reach)")
        out.append((d // reached, reached))
        reached = s * d
    out.append((_ceil_div(cotarget, reached), reached))
    return coalesce(_of_modes(out))


def _complement_run_time_stride(layout: Layout, modes: list, cotarget: int) -> Layout:
    """complement((n):(s), cotarget) = (s, ceil_div(cotarget, n * s)):(1, n * s), s a run-time stride (taken
    positive): CuTe orders the strides at compile time, so a run-time stride is for rank-1 layouts only."""
    if len(modes) != 1:
        raise LayoutError(f"cute.complement({layout}, {cotarget}): a run-time stride needs a rank-1 layout (CuTe "
                          "sorts the strides at compile time)")
    ((extent, stride),) = modes
    reached = stride * extent
    return Layout((stride, tirx.floordiv(cotarget + reached - 1, reached)), (1, reached))


def right_inverse(layout: Layout) -> Layout:
    """R with layout(R(i)) == i over the longest prefix [0, n) of offsets the layout reaches contiguously."""
    modes = _modes(coalesce(layout), "right_inverse")
    position, out, reached = 1, [], 1
    domain = []
    for s, d in modes:
        domain.append(position)
        position *= s
    for (s, d), at in sorted(zip(modes, domain), key=lambda m: m[0][1]):
        if d != reached:
            break
        out.append((s, at))
        reached *= s
    return coalesce(_of_modes(out))


def left_inverse(layout: Layout) -> Layout:
    """L with L(layout(i)) == i for every i of the layout's domain (the layout must be injective), as CuTe builds
    it: the modes by increasing stride, each taking the offsets up to the next stride (so the gaps between them
    map into it), and a leading stride-0 mode over the offsets below the smallest stride (a broadcast slot:
    left_inverse(8:2) is (2,8):(0,1))."""
    modes = _modes(coalesce(layout), "left_inverse")
    position, placed = 1, []
    for s, d in modes:
        if d != 0:
            placed.append((d, s, position))
        position *= s
    placed.sort()
    if not placed:
        return Layout(1, 0)
    out = [(placed[0][0], 0)] if placed[0][0] > 1 else []
    for k, (d, s, at) in enumerate(placed):
        if k + 1 < len(placed):
            following = placed[k + 1][0]
            if following % d or following // d < s:
                raise LayoutError(f"cute.left_inverse({layout}): the layout is not injective, or stride {following} "
                                  f"is not a multiple of {d}")
            out.append((following // d, at))
        else:
            out.append((s, at))
    return coalesce(_of_modes(out))


def _tiler(tiler: Any) -> Layout:
    return tiler if isinstance(tiler, Layout) else make_layout(tiler)


def logical_divide(layout: Layout, tiler: Any) -> Layout:
    """(tile, rest): mode 0 the elements of one tile of `tiler`, mode 1 the tiles. A tuple tiler divides mode by
    mode."""
    if _is_tuple(tiler) and not isinstance(tiler, Layout) and any(isinstance(t, Layout) or _is_tuple(t)
                                                                  for t in tiler):
        parts = [logical_divide(layout[i], t) for i, t in enumerate(tiler)]
        return make_layout(parts + [layout[i] for i in range(len(tiler), rank(layout))])
    tiler = _tiler(tiler)
    whole = _static(size(layout), "logical_divide")
    return composition(layout, make_layout([tiler, complement(tiler, whole)]))


def logical_product(block: Layout, tiler: Any) -> Layout:
    """(block, repetitions): `tiler` repeats `block` over offsets the block does not reach."""
    tiler = _tiler(tiler)
    reach = _static(size(block), "logical_product") * _static(cosize(tiler), "logical_product")
    return make_layout([block, composition(complement(block, reach), tiler)])


def _pad(layout: Layout, modes: int) -> Layout:
    return make_layout([layout[i] for i in range(rank(layout))] + [Layout(1, 0)] * (modes - rank(layout)))


def blocked_product(block: Layout, tiler: Any) -> Layout:
    """Mode i: (block's mode i, tiler's mode i): the tiles laid block after block."""
    tiler = _tiler(tiler)
    modes = max(rank(block), rank(tiler))
    product_ = logical_product(_pad(block, modes), _pad(tiler, modes))
    return make_layout([make_layout([product_[0][i], product_[1][i]]) for i in range(modes)])


def tiled_product(block: Layout, tiler: Any) -> Layout:
    """(block, rest's mode 0, rest's mode 1, ...): the logical product with its rest mode unpacked, as CuTe's
    `zipped_product(block, tiler)(_, repeat<R>(_))` (R the rest's rank: a rest of one mode stays as it is)."""
    product_ = logical_product(block, tiler)
    rest = product_[1]
    if not _is_tuple(rest.shape) or len(rest.shape) < 2:
        return product_
    return make_layout([product_[0]] + [rest[i] for i in range(rank(rest))])


# ------------------------------------------------------------------------------------------------- swizzles
class Swizzle:
    """CuTe's Swizzle<B, M, S>: offset ^ ((offset >> S) & (2^B - 1) << M) over the 2^B rows of 2^M elements."""

    def __init__(self, b_bits: int, m_base: int, s_shift: int):
        self.b_bits, self.m_base, self.s_shift = int(b_bits), int(m_base), int(s_shift)

    @property
    def is_swizzled(self) -> bool:
        return self.b_bits > 0

    def __call__(self, offset: Any) -> Any:
        if not self.is_swizzled:
            return offset
        mask = ((1 << self.b_bits) - 1) << (self.m_base + self.s_shift)
        if isinstance(offset, int):
            return offset ^ ((offset & mask) >> self.s_shift)
        return tirx.bitwise_xor(offset, tirx.shift_right(tirx.bitwise_and(offset, mask), self.s_shift))

    def recast(self, old_bits: int, new_bits: int) -> "Swizzle":
        """The same swizzle over elements of `new_bits` instead of `old_bits` (powers of two)."""
        if not self.is_swizzled:
            return Swizzle(0, 0, 0)
        for bits in (old_bits, new_bits):
            if bits <= 0 or bits & (bits - 1):
                raise LayoutError(f"cute.Swizzle.recast: element sizes must be powers of two; got {bits}")
        shift = int(math.log2(new_bits)) - int(math.log2(old_bits))
        m_base = self.m_base - shift
        if m_base >= 0:
            return Swizzle(self.b_bits, m_base, self.s_shift)
        return Swizzle(max(self.b_bits + m_base, 0), 0, self.s_shift)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Swizzle) and (other.b_bits, other.m_base, other.s_shift) == \
            (self.b_bits, self.m_base, self.s_shift)

    def __hash__(self) -> int:
        return hash((self.b_bits, self.m_base, self.s_shift))

    def __repr__(self) -> str:
        return f"Sw<{self.b_bits},{self.m_base},{self.s_shift}>"

    @staticmethod
    def parse(text: str) -> "Swizzle":
        body = text.strip()
        if not (body.startswith("Sw<") and body.endswith(">")):
            raise LayoutError(f"cute.Swizzle.parse: {text!r} is not 'Sw<b,m,s>'")
        try:
            return Swizzle(*(int(x) for x in body[3:-1].split(",")))
        except (TypeError, ValueError) as error:
            raise LayoutError(f"cute.Swizzle.parse: {text!r} is not 'Sw<b,m,s>'") from error

    def to_swizzle_mode(self) -> Any:
        _unsupported("Swizzle.to_swizzle_mode")


class ComposedLayout:
    """swizzle(offset + layout(c)): a swizzled CuTe layout."""

    def __init__(self, swizzle: Swizzle, offset: int, layout: Layout):
        self.swizzle, self.offset, self.layout = swizzle, int(offset), layout

    def __call__(self, coord: IntTupleLike) -> Any:
        return self.swizzle(self.offset + self.layout(coord))

    def recast(self, old_bits: int, new_bits: int) -> "ComposedLayout":
        """The same bytes over elements of `new_bits` instead of `old_bits` (CuTe's recast_layout): the swizzle
        recast, the offset and the layout counted in the new elements (a unit-stride mode's extent and the other
        strides scaled by old/new; narrower elements split each old one, wider ones must cover whole old ones)."""
        return ComposedLayout(self.swizzle.recast(old_bits, new_bits),
                              _recast_count(self.offset, old_bits, new_bits, "offset"),
                              _recast_layout(self.layout, old_bits, new_bits))

    def __repr__(self) -> str:
        return f"{self.swizzle} o {self.offset} o {self.layout}"

    @staticmethod
    def from_tilelang(layout: Any, buffer: Any = None) -> Any:
        _unsupported("ComposedLayout.from_tilelang")


def _recast_count(count: int, old_bits: int, new_bits: int, what: str) -> int:
    if (count * old_bits) % new_bits:
        raise LayoutError(f"cute.ComposedLayout.recast: {what} {count} of {old_bits}-bit elements is not a whole "
                          f"number of {new_bits}-bit elements")
    return count * old_bits // new_bits


def _recast_layout(layout: Layout, old_bits: int, new_bits: int) -> Layout:
    """`layout` over elements of `new_bits`: the unit-stride mode's extent and every other stride scaled by
    old_bits / new_bits (CuTe's upcast / downcast); strides 0 stay 0."""
    def leaf(extent: Any, stride: Any) -> tuple:
        extent, stride = _static(extent, "ComposedLayout.recast"), _static(stride, "ComposedLayout.recast")
        if stride == 1:
            return _recast_count(extent, old_bits, new_bits, "extent"), 1
        return extent, (stride and _recast_count(stride, old_bits, new_bits, "stride"))

    def walk(shape: Any, stride: Any) -> tuple:
        if _is_tuple(shape):
            pairs = [walk(s, d) for s, d in zip(shape, stride)]
            return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
        return leaf(shape, stride)

    return Layout(*walk(layout.shape, layout.stride))


def _unsupported(name: str) -> Any:
    raise UnsupportedError(
        f"tilelang.layout.cute.{name}: upstream's C++ recovery of NVIDIA descriptor layouts (TMA / tcgen05 "
        f"swizzle modes) is not part of TileLang-MUSA; MUSA's shared-memory swizzles are "
        f"tilelang.layout.make_sqmma_swizzled_layout and friends, and the CuTe algebra here works on plain layouts")


def restrict(layout: Layout, region: Sequence[Any]) -> Any:
    _unsupported("restrict")


def _ffi_node(name: str) -> type:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise UnsupportedError(
            f"tilelang.layout.cute.{name}: upstream's FFI node class for IntTuples; in TileLang-MUSA an IntTuple is "
            f"a plain Python value (an int, a PrimExpr, a ScaledBasis or a tuple): use cute.from_python")

    return type(name, (), {"__new__": refuse, "parse": staticmethod(refuse)})


IntTuple = _ffi_node("IntTuple")
IntTuple.parse = staticmethod(parse_int_tuple)  # upstream's IntTuple.parse(str(t)): the plain value
IntTupleConst = _ffi_node("IntTupleConst")
IntTuplePrimExpr = _ffi_node("IntTuplePrimExpr")
IntTupleScaledBasis = _ffi_node("IntTupleScaledBasis")
IntTupleTuple = _ffi_node("IntTupleTuple")

__all__ = ["ArithmeticTuple", "ComposedLayout", "E", "IntTuple", "IntTupleConst", "IntTuplePrimExpr", "IntTupleScaledBasis",
           "IntTupleTuple", "Layout", "ScaledBasis", "Swizzle", "blocked_product", "coalesce", "compatible",
           "complement", "composition", "congruent", "coshape", "cosize", "filter", "flatten", "flatten_to_tuple",
           "from_python", "left_inverse", "logical_divide", "logical_product", "make_column_major_layout",
           "make_identity_layout", "make_layout", "make_row_major_layout", "product", "rank", "restrict",
           "right_inverse", "size", "tiled_product", "to_python"]
