"""Inverting index maps that are linear over GF(2): power-of-two extents, and expressions built from
multiplication/division/modulo by powers of two, shifts, xor, and/or with constants, and additions of terms
with disjoint bits. Every SQMMA/TME swizzle and every MMA lane formula of MUSA_LAYOUTS.md is of this form;
the affine inverter of the wheel (`tvm.sym.inverse_affine_iter_map`) rejects xor, and fused splits such as
`(i * 32 + j) // 4`, which this handles.

Each output bit is an xor of input bits plus a constant bit; the map is a bijection iff that bit matrix is
square and invertible, and the inverse is read off the inverted matrix, grouping runs of bits into
`floordiv/floormod` slices so the result stays readable (`o1 % 8 ^ o0 % 8`, not 3 terms per bit).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from tvm import tirx

from ._expr import Expr, IntImm, Var, as_expr, const_int


class NotBitLinear(Exception):
    """The expression is not GF(2)-linear in its variables (the message says which construct)."""


# A value as bits: list index = bit position, entry = (mask of input-bit ids, constant bit).
_Bits = list[tuple[int, int]]


def _power_of_two(value: int | None) -> int | None:
    if value is None or value <= 0 or value & (value - 1):
        return None
    return value.bit_length() - 1


def _const_bits(value: int) -> _Bits:
    if value < 0:
        raise NotBitLinear(f"negative constant {value}")
    return [(0, (value >> b) & 1) for b in range(value.bit_length())]


def _is_const(bits: _Bits) -> bool:
    return all(mask == 0 for mask, _ in bits)


def _const_value(bits: _Bits) -> int:
    return sum(c << b for b, (_, c) in enumerate(bits))


def _xor(a: _Bits, b: _Bits) -> _Bits:
    n = max(len(a), len(b))
    a = a + [(0, 0)] * (n - len(a))
    b = b + [(0, 0)] * (n - len(b))
    return [(ma ^ mb, ca ^ cb) for (ma, ca), (mb, cb) in zip(a, b)]


def _trim(bits: _Bits) -> _Bits:
    while bits and bits[-1] == (0, 0):
        bits = bits[:-1]
    return bits


class _Decomposer:
    def __init__(self, var_bits: Mapping[Var, tuple[int, int]]):
        self.var_bits = var_bits  # Var -> (first bit id, number of bits)

    def bits(self, e: Expr) -> _Bits:
        return _trim(self._bits(e))

    def _bits(self, e: Expr) -> _Bits:
        if isinstance(e, IntImm):
            return _const_bits(int(e.value))
        if isinstance(e, Var):
            if e not in self.var_bits:
                raise NotBitLinear(f"free variable `{e.name}`")
            first, count = self.var_bits[e]
            return [(1 << (first + b), 0) for b in range(count)]
        if isinstance(e, tirx.Cast):
            return self.bits(e.value)
        if isinstance(e, tirx.BitwiseXor):
            return _xor(self.bits(e.a), self.bits(e.b))
        if isinstance(e, (tirx.Add, tirx.BitwiseOr)):
            return self._disjoint_sum(e)
        if isinstance(e, tirx.BitwiseAnd):
            a, b = self.bits(e.a), self.bits(e.b)
            if not _is_const(b):
                a, b = b, a
            if not _is_const(b):
                raise NotBitLinear(f"`&` of two variable terms in `{e}`")
            mask = _const_value(b)
            return [bit if (mask >> k) & 1 else (0, 0) for k, bit in enumerate(a)]
        if isinstance(e, tirx.Sub):
            a, b = self.bits(e.a), self.bits(e.b)
            if _is_const(a) and _is_const(b):
                return _const_bits(_const_value(a) - _const_value(b))
            raise NotBitLinear(f"subtraction in `{e}`")
        if isinstance(e, tirx.Mul):
            a, b = self.bits(e.a), self.bits(e.b)
            if not _is_const(b):
                a, b = b, a
            if not _is_const(b):
                raise NotBitLinear(f"product of two variable terms in `{e}`")
            factor = _const_value(b)
            if factor == 0:
                return []
            if _is_const(a):
                return _const_bits(_const_value(a) * factor)
            shift = _power_of_two(factor)
            if shift is None:
                raise NotBitLinear(f"multiplication by {factor}, not a power of two, in `{e}`")
            return [(0, 0)] * shift + a
        if isinstance(e, (tirx.FloorDiv, tirx.FloorMod, tirx.RShift, tirx.LShift)):
            return self._shift_or_slice(e)
        raise NotBitLinear(f"`{type(e).__name__}` in `{e}`")

    def _disjoint_sum(self, e: Expr) -> _Bits:
        a, b = self.bits(e.a), self.bits(e.b)
        if _is_const(a) and _is_const(b):
            return _const_bits(_const_value(a) + _const_value(b) if isinstance(e, tirx.Add)
                               else _const_value(a) | _const_value(b))
        for (ma, ca), (mb, cb) in zip(a, b):
            if (ma or ca) and (mb or cb):
                raise NotBitLinear(f"terms of `{e}` overlap in their bits (a carry may occur)")
        return _xor(a, b)

    def _shift_or_slice(self, e: Expr) -> _Bits:
        a = self.bits(e.a)
        amount = const_int(e.b)
        if isinstance(e, (tirx.RShift, tirx.LShift)):
            if amount is None or amount < 0:
                raise NotBitLinear(f"shift by a non-constant in `{e}`")
            return a[amount:] if isinstance(e, tirx.RShift) else [(0, 0)] * amount + a
        shift = _power_of_two(amount)
        if shift is None:
            raise NotBitLinear(f"division or modulo by {amount}, not a power of two, in `{e}`")
        return a[shift:] if isinstance(e, tirx.FloorDiv) else a[:shift]


def _slice(var: Var, low: int, width: int, total: int) -> Expr:
    """Bits [low, low + width) of `var` (which has `total` bits)."""
    out = var if low == 0 else tirx.floordiv(var, 1 << low)
    if low + width < total:
        out = tirx.floormod(out, 1 << width)
    return out


def invert(outputs: Sequence[Expr], inputs: Sequence[Var], input_extents: Sequence[int],
           output_extents: Sequence[int], output_vars: Sequence[Var]) -> list[Expr]:
    """Inverse of `inputs -> outputs` as expressions of `output_vars`, one per input.

    Raises NotBitLinear if an extent is not a power of two, an output is not GF(2)-linear, or the map is not a
    bijection between the input and output boxes.
    """
    in_widths = []
    for var, extent in zip(inputs, input_extents):
        width = _power_of_two(extent)
        if width is None:
            raise NotBitLinear(f"input extent {extent} of `{var.name}` is not a power of two")
        in_widths.append(width)
    out_widths = []
    for k, extent in enumerate(output_extents):
        width = _power_of_two(extent)
        if width is None:
            raise NotBitLinear(f"output extent {extent} of output {k} is not a power of two")
        out_widths.append(width)
    if sum(in_widths) != sum(out_widths):
        raise NotBitLinear(f"the input box has 2^{sum(in_widths)} points and the output box 2^{sum(out_widths)}")

    var_bits, first = {}, 0
    for var, width in zip(inputs, in_widths):
        var_bits[var] = (first, width)
        first += width
    decompose = _Decomposer(var_bits)
    rows: list[tuple[int, int]] = []  # one per output bit, in output-bit-id order
    for k, (expr, width) in enumerate(zip(outputs, out_widths)):
        bits = decompose.bits(expr)
        if len(bits) > width:
            raise NotBitLinear(f"output {k} (`{expr}`) exceeds its extent {1 << width}")
        rows.extend(bits + [(0, 0)] * (width - len(bits)))

    inverse_rows = _invert_matrix([m for m, _ in rows], len(rows))
    const = sum(c << r for r, (_, c) in enumerate(rows))

    out_bit = []  # output bit id -> (output index, bit)
    for k, width in enumerate(out_widths):
        out_bit.extend((k, b) for b in range(width))
    results = []
    for var, width in zip(inputs, in_widths):
        first, _ = var_bits[var]
        # input bit = xor over output bits selected by inverse row, xor the image of the constant
        sources = []
        offset = 0
        for b in range(width):
            row = inverse_rows[first + b]
            sources.append(frozenset(out_bit[r] for r in range(len(rows)) if (row >> r) & 1))
            offset |= (bin(row & const).count("1") & 1) << b
        results.append(_emit(sources, offset, out_widths, output_vars))
    return results


def _emit(sources: list[frozenset], offset: int, out_widths: Sequence[int], output_vars: Sequence[Var]) -> Expr:
    """sum over runs of bits that are shifted copies of each other: (xor of output slices) << start."""
    terms: list[Expr] = []
    b = 0
    while b < len(sources):
        run = 1
        while b + run < len(sources) and sources[b + run] == frozenset((k, p + run) for k, p in sources[b]) \
                and all(p + run < out_widths[k] for k, p in sources[b]):
            run += 1
        if sources[b]:
            pieces = [_slice(output_vars[k], p, run, out_widths[k]) for k, p in sorted(sources[b])]
            term = pieces[0]
            for piece in pieces[1:]:
                term = tirx.bitwise_xor(term, piece)
            terms.append(term * (1 << b) if b else term)
        b += run
    value = None
    for term in terms:
        value = term if value is None else value + term  # the terms' bits are disjoint: + is |
    if value is None:
        value = as_expr(0)
    if offset:
        value = tirx.bitwise_xor(value, as_expr(offset))
    return value


def _invert_matrix(rows: list[int], n: int) -> list[int]:
    """Inverse over GF(2) of the n x n matrix whose row r is the bitmask rows[r]; raises if singular.

    Returns the inverse as column masks per input bit: result[c] has bit r set iff input bit c depends on output
    bit r.
    """
    # Augment [A | I] and eliminate; rows are (A row mask, I row mask).
    work = [(rows[r], 1 << r) for r in range(n)]
    for col in range(n):
        pivot = next((r for r in range(col, n) if (work[r][0] >> col) & 1), None)
        if pivot is None:
            raise NotBitLinear("the map is not a bijection (its GF(2) bit matrix is singular)")
        work[col], work[pivot] = work[pivot], work[col]
        pa, pi = work[col]
        for r in range(n):
            if r != col and (work[r][0] >> col) & 1:
                work[r] = (work[r][0] ^ pa, work[r][1] ^ pi)
    # Row `col` of the reduced augmented part is row `col` of A^-1: input bit `col` in terms of output bits.
    return [work[col][1] for col in range(n)]
