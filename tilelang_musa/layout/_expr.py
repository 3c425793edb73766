"""Index-expression helpers shared by the layout classes: building, substituting, simplifying, bounding and
numerically evaluating the integer TIR expressions a layout is made of.

The analyzer of the 0.27 wheel (`tvm.sym.Analyzer`) bounds and simplifies affine index arithmetic well but
returns an unbounded interval for bitwise operators, which every swizzle and most MMA lane formulas use:
`bounds` therefore falls back to interval arithmetic of its own where a subtree contains one.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx

from ..ir.utils import by_identity

Expr = tvm.ir.Expr
Var = tvm.ir.expr.Var
Range = tvm.ir.Range
IntImm = tirx.IntImm

INDEX_DTYPE = "int32"

_BITWISE = (tirx.BitwiseXor, tirx.BitwiseAnd, tirx.BitwiseOr, tirx.BitwiseNot, tirx.LShift, tirx.RShift)


def make_vars(count: int, prefix: str = "i") -> list[Var]:
    return [tirx.Var(f"{prefix}{k}", INDEX_DTYPE) for k in range(count)]


_PLACEHOLDERS: list[Var] = []


def input_placeholders(count: int) -> list[Var]:
    """The index variables every layout's upstream accessors (`get_forward_vars`, `get_forward_index`, ...) are
    written over: the same Var objects for every layout, as upstream's shared input placeholders, so that two layouts'
    expressions can be compared (`can_prove_equal`). A layout's own fields keep variables of its own."""
    while len(_PLACEHOLDERS) < count:
        _PLACEHOLDERS.append(tirx.Var(f"_i{len(_PLACEHOLDERS)}", INDEX_DTYPE))
    return _PLACEHOLDERS[:count]


def as_expr(value: Any) -> Expr:
    """An int32 index expression from a Python int, a numpy integer or an expression (cast to int32 if wider)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"expected an index expression or int, got the boolean {value!r}")
    if isinstance(value, (int, np.integer)):
        return tirx.const(int(value), INDEX_DTYPE)
    if isinstance(value, Expr):
        if str(value.ty.dtype) != INDEX_DTYPE:
            return tirx.Cast(INDEX_DTYPE, value)
        return value
    raise TypeError(f"expected an index expression or int, got {type(value).__name__}: {value!r}")


def const_int(value: Any) -> int | None:
    """The Python int of a constant (int or IntImm), else None."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, IntImm):
        return int(value.value)
    return None


def substitute(expr: Expr, vmap: Mapping[Var, Expr]) -> Expr:
    """Replace the Vars of `vmap` (by identity) in `expr`."""
    if not vmap:
        return expr
    return tvm_ffi.structural_mutate(expr, [(Var, by_identity(vmap))])


_FOLD = {
    tirx.BitwiseXor: lambda a, b: a ^ b, tirx.BitwiseAnd: lambda a, b: a & b, tirx.BitwiseOr: lambda a, b: a | b,
    tirx.LShift: lambda a, b: a << b, tirx.RShift: lambda a, b: a >> b,
}


def fold_bitwise(expr: Expr) -> Expr:
    """`expr` with each bitwise operator on two constants replaced by its value: the analyzer leaves `0 ^ 0`
    standing (a swizzle applied at a tile's origin), and it would reach the generated source."""
    def fold(node, mutator):
        node = mutator.default_mutate(node)
        a, b = const_int(node.a), const_int(node.b)
        if a is None or b is None or (isinstance(node, (tirx.LShift, tirx.RShift)) and not 0 <= b < 64):
            return node
        return tirx.const(_FOLD[type(node)](a, b), str(node.ty.dtype))

    return tvm_ffi.structural_mutate(expr, [(cls, fold) for cls in _FOLD])


def has_bitwise(expr: Expr) -> bool:
    found = []
    tvm_ffi.structural_walk(expr, [(cls, lambda n: found.append(n)) for cls in _BITWISE])
    return bool(found)


def analyzer_for(dom: Mapping[Var, Any]) -> tvm.sym.Analyzer:
    """An analyzer that knows each Var of `dom` lies in [0, extent)."""
    ana = tvm.sym.Analyzer()
    for var, extent in dom.items():
        ana.bind(var, Range(0, as_expr(extent)))
    return ana


def simplify(expr: Expr, dom: Mapping[Var, Any]) -> Expr:
    return analyzer_for(dom).simplify(expr)


# ---- bounds ---------------------------------------------------------------------------------------------------------

_INF = float("inf")


def bounds(expr: Expr, dom: Mapping[Var, Any]) -> tuple[int, int] | None:
    """Inclusive integer bounds (lo, hi) of `expr` with each Var of `dom` in [0, extent), or None if unbounded
    (symbolic extents, or an operator we cannot bound)."""
    ana = analyzer_for(dom)
    lo, hi = _bounds(expr, ana)
    if lo == -_INF or hi == _INF:
        return None
    return int(lo), int(hi)


def _bounds(expr: Expr, ana: tvm.sym.Analyzer) -> tuple[float, float]:
    if not has_bitwise(expr):
        cib = ana.const_int_bound(expr)
        lo = -_INF if cib.min_value <= -(2**62) else cib.min_value
        hi = _INF if cib.max_value >= 2**62 else cib.max_value
        return lo, hi
    if isinstance(expr, IntImm):
        return expr.value, expr.value
    if isinstance(expr, (tirx.BitwiseXor, tirx.BitwiseOr, tirx.BitwiseAnd)):
        (alo, ahi), (blo, bhi) = _bounds(expr.a, ana), _bounds(expr.b, ana)
        if min(alo, blo) < 0 or max(ahi, bhi) == _INF:
            return -_INF, _INF
        if isinstance(expr, tirx.BitwiseAnd):
            return 0, min(ahi, bhi)
        return 0, (1 << int(max(ahi, bhi)).bit_length()) - 1
    if isinstance(expr, (tirx.RShift, tirx.LShift)):
        shift = const_int(expr.b)
        alo, ahi = _bounds(expr.a, ana)
        if shift is None or shift < 0 or alo < 0 or ahi == _INF:
            return -_INF, _INF
        if isinstance(expr, tirx.RShift):
            return int(alo) >> shift, int(ahi) >> shift
        return int(alo) << shift, int(ahi) << shift
    if isinstance(expr, (tirx.Add, tirx.Sub, tirx.Mul, tirx.Min, tirx.Max)):
        (alo, ahi), (blo, bhi) = _bounds(expr.a, ana), _bounds(expr.b, ana)
        if isinstance(expr, tirx.Add):
            return alo + blo, ahi + bhi
        if isinstance(expr, tirx.Sub):
            return alo - bhi, ahi - blo
        if isinstance(expr, tirx.Min):
            return min(alo, blo), min(ahi, bhi)
        if isinstance(expr, tirx.Max):
            return max(alo, blo), max(ahi, bhi)
        if _INF in (abs(alo), abs(ahi), abs(blo), abs(bhi)):
            return -_INF, _INF
        corners = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
        return min(corners), max(corners)
    if isinstance(expr, (tirx.FloorDiv, tirx.FloorMod)):
        divisor = const_int(expr.b)
        alo, ahi = _bounds(expr.a, ana)
        if divisor is None or divisor <= 0:
            return -_INF, _INF
        if isinstance(expr, tirx.FloorMod):
            if alo >= 0 and ahi < divisor:
                return alo, ahi
            return 0, divisor - 1
        if _INF in (abs(alo), abs(ahi)):
            return -_INF, _INF
        return int(alo) // divisor, int(ahi) // divisor
    return -_INF, _INF


# ---- numeric evaluation ---------------------------------------------------------------------------------------------


def evaluate(expr: Expr, env: Mapping[Var, Any]) -> Any:
    """Evaluate an integer index expression with numpy (floor division semantics, as TIR's floordiv/floormod).

    `env` maps each free Var to an int or an integer numpy array (arrays broadcast); the result is an int64 array
    or numpy scalar. Raises KeyError naming a Var missing from `env`.
    """
    return _Evaluator(env).run(expr)


class _Evaluator:
    def __init__(self, env: Mapping[Var, Any]):
        self.env = {v: np.asarray(x, dtype=np.int64) for v, x in env.items()}
        self.memo: dict[int, Any] = {}

    def run(self, expr: Expr) -> Any:
        key = hash(expr)  # the node's address: a subtree the expression shares is evaluated once
        hit = self.memo.get(key)
        if hit is not None and hit[0].same_as(expr):
            return hit[1]
        value = self._eval(expr)
        self.memo[key] = (expr, value)
        return value

    def _eval(self, e: Expr) -> Any:
        if isinstance(e, IntImm):
            return np.int64(e.value)
        if isinstance(e, Var):
            if e not in self.env:
                raise KeyError(f"no value for the variable `{e.name}` while evaluating an index expression")
            return self.env[e]
        binary = _NUMPY_BINARY.get(type(e))
        if binary is not None:
            return binary(self.run(e.a), self.run(e.b))
        if isinstance(e, tirx.BitwiseNot):
            return np.invert(self.run(e.a))
        if isinstance(e, tirx.Not):
            return np.logical_not(self.run(e.a)).astype(np.int64)
        if isinstance(e, tirx.Cast):
            return self.run(e.value)
        if isinstance(e, tirx.Select):
            return np.where(self.run(e.condition) != 0, self.run(e.true_value), self.run(e.false_value))
        if isinstance(e, tvm.ir.expr.Call) and getattr(e.op, "name", "") == "prim.if_then_else":
            cond, a, b = (self.run(x) for x in e.args)
            return np.where(cond != 0, a, b)
        raise TypeError(f"cannot evaluate `{e}` ({type(e).__name__}) as an index expression")


def _trunc_div(a, b):
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


_NUMPY_BINARY = {
    tirx.Add: np.add,
    tirx.Sub: np.subtract,
    tirx.Mul: np.multiply,
    tirx.FloorDiv: np.floor_divide,
    tirx.FloorMod: np.mod,
    tirx.Div: _trunc_div,
    tirx.Mod: lambda a, b: a - b * _trunc_div(a, b),
    tirx.Min: np.minimum,
    tirx.Max: np.maximum,
    tirx.BitwiseXor: np.bitwise_xor,
    tirx.BitwiseAnd: np.bitwise_and,
    tirx.BitwiseOr: np.bitwise_or,
    tirx.LShift: np.left_shift,
    tirx.RShift: np.right_shift,
    tirx.EQ: lambda a, b: (a == b).astype(np.int64),
    tirx.NE: lambda a, b: (a != b).astype(np.int64),
    tirx.LT: lambda a, b: (a < b).astype(np.int64),
    tirx.LE: lambda a, b: (a <= b).astype(np.int64),
    tirx.GT: lambda a, b: (a > b).astype(np.int64),
    tirx.GE: lambda a, b: (a >= b).astype(np.int64),
    tirx.And: lambda a, b: np.logical_and(a, b).astype(np.int64),
    tirx.Or: lambda a, b: np.logical_or(a, b).astype(np.int64),
}


def grid(shape: Sequence[int]) -> list[np.ndarray]:
    """Every coordinate of `shape`, row-major, as one flat int64 array per dimension."""
    if not shape:
        return []
    mesh = np.meshgrid(*[np.arange(int(n), dtype=np.int64) for n in shape], indexing="ij")
    return [m.reshape(-1) for m in mesh]


def open_grid(shape: Sequence[int]) -> list[np.ndarray]:
    """Every coordinate of `shape` as one int64 array per dimension that varies along its own axis only (shape
    [1, .., n_d, .., 1]): `evaluate` broadcasts them, so a subexpression of one coordinate costs n_d operations,
    not the whole grid's."""
    ndim = len(shape)
    return [np.arange(int(n), dtype=np.int64).reshape([int(n) if d == k else 1 for k in range(ndim)])
            for d, n in enumerate(shape)]


def all_distinct(keys: np.ndarray) -> bool:
    """No value of the integer array `keys` occurs twice. A table of seen values when they are small and
    non-negative (linear time; numpy's hashing `unique` costs ~0.2 us an element), else a sort."""
    keys = keys.reshape(-1)
    if keys.size < 2:
        return True
    low, high = int(keys.min()), int(keys.max())
    if low >= 0 and high < 4 * keys.size + 1024:
        return int(np.bincount(keys).max()) <= 1
    ordered = np.sort(keys)
    return not bool(np.any(ordered[1:] == ordered[:-1]))


def all_const(values: Iterable[Any]) -> bool:
    return all(const_int(v) is not None for v in values)
