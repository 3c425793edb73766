"""Inverting a bijective index map `inputs -> outputs` into expressions of the outputs.

Two inverters, tried in order: the wheel's affine one (`detect_iter_map` + `inverse_affine_iter_map`: any
extents, but no xor and no split of a fused index) and our GF(2) one (`_bitlinear`: power-of-two extents,
xor swizzles and fused splits). With constant extents the result is then checked on every point, so a wrong
inverse can never leave this module (the next inverter is tried); a map that is not a bijection is reported with two colliding inputs.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import tvm
import tvm_ffi

from . import _bitlinear
from ._expr import (Expr, Range, Var, all_distinct, as_expr, const_int, evaluate, make_vars, open_grid, simplify,
                    substitute)

_CHECK_LIMIT = 1 << 22  # points an exhaustive check may evaluate

# Inverses already computed and checked on every point, up to renaming of the Vars: a kernel's fragments, and every
# compile of the same tile shapes, invert the same maps (the exhaustive checks are most of a GEMM's layout time).
# Only checked maps are kept: their outputs use no Var but the inputs, and the inverses none but the output Vars
# (the numeric checks evaluate them with nothing else bound), so renaming those is all a hit needs.
_INVERTED: dict[tuple, list[tuple[Any, list[Var], list[Expr]]]] = {}
_INVERTED_KEEP = 256


class NotInvertible(Exception):
    """The map is not a bijection, or neither inverter handles its form (the message says which)."""


def invert(outputs: Sequence[Expr], inputs: Sequence[Var], input_extents: Sequence[Any],
           output_extents: Sequence[Any], out_prefix: str = "o") -> tuple[list[Var], list[Expr]]:
    """(output vars, one expression per input) such that inputs == exprs(outputs(inputs))."""
    in_ext = [const_int(e) for e in input_extents]
    out_ext = [const_int(e) for e in output_extents]
    static = all(e is not None for e in in_ext + out_ext)
    checked = static and int(np.prod(in_ext, dtype=np.int64)) <= _CHECK_LIMIT
    if checked:
        key_map = [*inputs, *outputs]
        key = (out_prefix, tuple(in_ext), tuple(out_ext), tvm_ffi.structural_hash(key_map, map_free_vars=True))
        for known_map, known_vars, known_exprs in _INVERTED.get(key, ()):
            if tvm_ffi.structural_equal(known_map, key_map, map_free_vars=True):
                out_vars = make_vars(len(outputs), out_prefix)
                rename = dict(zip(known_vars, out_vars))
                return out_vars, [substitute(e, rename) for e in known_exprs]
    if static:
        _check_bijective(outputs, inputs, in_ext, out_ext)
    out_vars = make_vars(len(outputs), out_prefix)
    out_dom = dict(zip(out_vars, output_extents))

    errors = []
    for attempt in (_affine, _bit_linear):
        try:
            exprs = attempt(outputs, inputs, input_extents, output_extents, out_vars, static)
        except (NotInvertible, _bitlinear.NotBitLinear) as err:
            errors.append(str(err))
            continue
        exprs = [simplify(e, out_dom) for e in exprs]
        if static and (wrong := _round_trip_error(outputs, inputs, in_ext, out_vars, exprs)) is not None:
            errors.append(f"{attempt.__name__.strip('_')} inverter: {wrong}")  # the wheel's, on `127 - i`
            continue
        if checked:
            while len(_INVERTED) >= _INVERTED_KEEP:  # the oldest goes (tolerant of a compile in another thread)
                try:
                    _INVERTED.pop(next(iter(_INVERTED)), None)
                except (StopIteration, RuntimeError):
                    break
            _INVERTED.setdefault(key, []).append((key_map, out_vars, exprs))
        return out_vars, exprs
    raise NotInvertible("; ".join(errors))


def _affine(outputs, inputs, input_extents, output_extents, out_vars, static) -> list[Expr]:
    dom = {v: Range(0, as_expr(e)) for v, e in zip(inputs, input_extents)}
    # Symbolic extents cannot be checked for bijectivity; the caller guards the ragged tail (as upstream does).
    level = "bijective" if static else "nocheck"
    result = tvm.sym.detect_iter_map(list(outputs), dom, check_level=level)
    if len(result.indices) == 0:
        raise NotInvertible("affine inverter: " + "; ".join(str(e) for e in result.errors))
    inverse = tvm.sym.inverse_affine_iter_map(result.indices, list(out_vars))
    # Inputs of extent 1 do not appear in the iter map: they are always 0.
    return [inverse[v] if v in inverse else as_expr(0) for v in inputs]


def _bit_linear(outputs, inputs, input_extents, output_extents, out_vars, static) -> list[Expr]:
    if not static:
        raise NotInvertible("bit-linear inverter: needs constant extents")
    return _bitlinear.invert(outputs, inputs, [const_int(e) for e in input_extents],
                             [const_int(e) for e in output_extents], out_vars)


def _check_bijective(outputs, inputs, in_ext, out_ext) -> None:
    n_in, n_out = int(np.prod(in_ext, dtype=np.int64)), int(np.prod(out_ext, dtype=np.int64))
    if n_in > _CHECK_LIMIT:
        return
    shape = tuple(int(e) for e in in_ext)
    point = lambda k: tuple(int(c) for c in np.unravel_index(k, shape))  # the input at flat position k
    env = dict(zip(inputs, open_grid(shape)))
    flat = np.zeros(n_in, dtype=np.int64)
    for expr, extent in zip(outputs, out_ext):
        value = np.broadcast_to(evaluate(expr, env), shape).reshape(-1)
        bad = np.nonzero((value < 0) | (value >= extent))[0]
        if bad.size:
            raise NotInvertible(f"input {point(bad[0])} maps to {int(value[bad[0]])}, outside [0, {extent}) of "
                                f"`{expr}`")
        flat = flat * extent + value
    if not all_distinct(flat):
        order = np.argsort(flat, kind="stable")
        same = np.nonzero(flat[order][1:] == flat[order][:-1])[0]
        raise NotInvertible(f"inputs {point(order[same[0]])} and {point(order[same[0] + 1])} map to the same output: "
                            "the map is not injective")
    if n_in != n_out:
        raise NotInvertible(f"{n_in} inputs cannot cover the {n_out} points of the output box {list(out_ext)}")


def _round_trip_error(outputs, inputs, in_ext, out_vars, exprs) -> str | None:
    """Why the computed inverse is wrong (an input it does not give back), or None."""
    if int(np.prod(in_ext, dtype=np.int64)) > _CHECK_LIMIT:
        return None
    shape = tuple(int(e) for e in in_ext)
    coords = open_grid(shape)
    env = dict(zip(inputs, coords))
    images = {o: np.broadcast_to(evaluate(e, env), shape) for o, e in zip(out_vars, outputs)}
    for var, coord, expr in zip(inputs, coords, exprs):
        back = np.broadcast_to(evaluate(expr, images), shape)
        if not np.array_equal(back, np.broadcast_to(coord, shape)):
            return f"the computed inverse `{expr}` of `{var.name}` does not round-trip"
    return None
