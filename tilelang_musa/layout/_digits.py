"""Which mixed-radix digits of an input variable an index expression depends on.

A digit `(lower, extent)` of `v` is `v // lower % extent`. A fragment whose thread map uses some digits of the
logical coordinates keeps the other digits in each thread's registers: inferring a local index from a thread
map (`T.Fragment(shape, forward_thread_fn=...)`) and condensing a reduction's replication both ask "which digits
does this expression use?".

Two exact strategies: for constant power-of-two extents, probe each bit (flip it everywhere in the domain and
see whether the expression changes: an unused bit can be flipped in any combination without effect); otherwise
read the splits of the affine normal form (`tvm.sym.normalize_to_iter_sum`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx

from ._expr import Expr, Range, Var, as_expr, const_int, evaluate, grid


class DigitError(Exception):
    """The expression's dependence on a variable is not a set of digits (the message says why)."""


_PROBE_LIMIT = 1 << 22  # domain points a bit probe may evaluate


@dataclass(frozen=True)
class Digit:
    lower: int
    extent: int

    def of(self, var: Expr, var_extent: int) -> Expr:
        out = var if self.lower == 1 else tirx.floordiv(var, self.lower)
        if self.lower * self.extent < var_extent:
            out = tirx.floormod(out, self.extent)
        return out


def used_digits(expr: Expr, var: Var, dom: Mapping[Var, Any]) -> list[Digit]:
    """The digits of `var` that `expr` depends on, ordered from the lowest; `dom` holds every free Var's extent."""
    extents = {v: const_int(e) for v, e in dom.items()}
    extent = extents[var]
    if extent is not None and extent & (extent - 1) == 0 and all(e is not None for e in extents.values()):
        size = int(np.prod([e for e in extents.values()], dtype=np.int64))
        if size <= _PROBE_LIMIT:
            return _probe_bits(expr, var, extents)
    return _affine_splits(expr, var, dom)


def complement(digits: list[Digit], extent: int) -> list[Digit]:
    """The digits of a variable in [0, extent) not covered by `digits` (sorted, non-overlapping)."""
    out, cursor = [], 1
    for d in digits:
        if d.lower % cursor:
            raise DigitError(f"digit {d} does not align with the digits below it")
        if d.lower > cursor:
            out.append(Digit(cursor, d.lower // cursor))
        cursor = d.lower * d.extent
    if extent % cursor and cursor > extent:
        raise DigitError(f"digits up to {cursor} do not divide the extent {extent}")
    if cursor < extent:  # the top digit, `var // cursor`: the last value partial where cursor does not divide
        out.append(Digit(cursor, -(-extent // cursor)))
    return out


def _probe_bits(expr: Expr, var: Var, extents: Mapping[Var, int]) -> list[Digit]:
    names = list(extents)
    coords = grid([extents[v] for v in names])
    env = dict(zip(names, coords))
    base = np.broadcast_to(evaluate(expr, env), coords[0].shape if coords else ())
    used = []
    for b in range(extents[var].bit_length() - 1):
        flipped = dict(env)
        flipped[var] = env[var] ^ (1 << b)
        if np.any(np.broadcast_to(evaluate(expr, flipped), base.shape) != base):
            used.append(b)
    digits: list[Digit] = []
    for b in used:  # merge runs of consecutive bits into one digit
        if digits and digits[-1].lower * digits[-1].extent == 1 << b:
            digits[-1] = Digit(digits[-1].lower, digits[-1].extent * 2)
        else:
            digits.append(Digit(1 << b, 2))
    return digits


def _affine_splits(expr: Expr, var: Var, dom: Mapping[Var, Any]) -> list[Digit]:
    ana = tvm.sym.Analyzer()
    ranges = {v: Range(0, as_expr(e)) for v, e in dom.items()}
    try:
        norm = tvm.sym.normalize_to_iter_sum(expr, ranges, ana)
    except Exception as err:  # the wheel raises a generic TVM error
        raise DigitError(f"`{expr}` is not an affine map of its variables: {err}") from None
    if const_int(norm.base) is None:
        raise DigitError(f"`{expr}` is not an affine map of its variables")
    digits = []
    for split in norm.args:
        source = split.source.source
        if isinstance(source, Var):
            if source.same_as(var):
                lower, extent = const_int(split.lower_factor), const_int(split.extent)
                if lower is None or extent is None:
                    raise DigitError(f"`{expr}` splits `{var.name}` by a symbolic factor")
                digits.append(Digit(lower, extent))
        elif _mentions(source, var):
            raise DigitError(f"`{expr}` fuses `{var.name}` with other variables before splitting it")
    digits.sort(key=lambda d: d.lower)
    for lo, hi in zip(digits, digits[1:]):
        if hi.lower < lo.lower * lo.extent:
            raise DigitError(f"`{expr}` uses overlapping digits of `{var.name}`")
    return digits


def _mentions(iter_sum: Any, var: Var) -> bool:
    expr = tvm.sym.normalize_iter_map_to_expr(iter_sum)
    found = []
    tvm_ffi.structural_walk(expr, [(Var, lambda v: found.append(v.same_as(var)))])
    return any(found)
