"""Register layouts of MUSA's matrix instructions, and their block-level composition used by `T.gemm`.

Instructions (one registry entry each; formulas from MUSA_LAYOUTS.md sections 1-3, written as the document
states them, as functions of the lane `t` in the instruction's thread group and the value index `v` in a
thread's fragment; the Fragments are derived by inverting them, and checked on every (t, v)):

    mp_31.wmma.m16n8k8 / m16n8k16 / m8n16k16 / m16n16k16 / m16n16k32   32 lanes (a warp); A/B in registers
    mp_22.mma.m32n32k16 (16-bit) / m32n32k8 (tf32) / m32n32k32 (int8)  128 lanes (an mp_22 warp); A/B in registers
    mp_31.sqmma.m{M}n{N}, the 11 shapes of MUSA_FACTS                   128 lanes (a squad); A/B in shared memory

Operands: A is (m, k) and B is (n, k) at instruction level ("rows" r = m or n). "K-major" (mp_22: Row) and
"MN-major" (Col) are the two register layouts the instruction's transpose flags select.

Block-level composition (the contract the C++ gemm templates follow):

* An instruction runs on a *group* of G threads (G = `group_size`: 32 for WMMA, 128 for mp_22 MMA and SQMMA).
  The block's threads form groups g = 0 .. threads/G - 1 (group g = threads [g*G, (g+1)*G)); the lane of a
  thread is `thread % G`.
* The block tile M x N is split over a g_m x g_n grid of groups (gemm_partition.GemmWarpPolicy), group id
  `g = gm + g_m * gn` (M fastest). Group (gm, gn) owns rows [gm*M/g_m, (gm+1)*M/g_m) and columns
  [gn*N/g_n, (gn+1)*N/g_n): a (M/g_m) x (N/g_n) tile of atoms_m x atoms_n atoms, each atom the instruction's
  m x n, atom (ai, aj) with ai along M and aj along N.
* Accumulator C: element (i, j) of atom (ai, aj) in group (gm, gn), at (mi, nj) inside the atom whose
  instruction layout puts it in lane t, value v, lives in thread `(gm + g_m * gn) * G + t`, local slot
  `(ai * atoms_n + aj) * regs_per_atom + v` (regs_per_atom = m * n / G).
* Register operands (WMMA, mp_22 MMA), K split into atoms_k = K / k atoms with ak along K:
  A element (i, kk) -> thread `(gm + g_m * rep) * G + t`, slot `(ai * atoms_k + ak) * vals_A + v`, replicated over
  rep = 0 .. g_n - 1 (every group of the row of groups needs it); B element (kk, j) -> thread
  `(rep + g_m * gn) * G + t`, slot `(aj * atoms_k + ak) * vals_B + v`, replicated over rep = 0 .. g_m - 1.
  vals_X = rows * k / G values per atom. A's logical order is (M, K), or (K, M) if `transposed`; B's is
  (K, N), or (N, K) if `transposed` (T.gemm's transpose_A / transpose_B).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ._expr import make_vars, substitute
from ._reuse import reuse_layout
from .fragment import Fragment, new_replicate_var
from .layout import Layout, LayoutError

LaneMap = Callable[[Any, Any], tuple[Any, Any]]  # (t, v) -> (row, col); works on ints, numpy arrays and exprs


@dataclass(frozen=True)
class MmaInstruction:
    """One matrix instruction shape: its thread group and the lane formulas of its register fragments."""

    name: str  # registry key, e.g. "mp_31.wmma.m16n8k16"
    arch: str
    kind: str  # "wmma" | "mma" | "sqmma"
    group_size: int
    m: int
    n: int
    ks: Mapping[int, tuple[int, ...]]  # operand element bits -> the K values the instruction takes
    accumulator_lanes: LaneMap = field(repr=False)  # (t, v) -> (m, n)
    # (rows, k, bits, k_major) -> (t, v) -> (r, k); None when the operands are read from shared memory
    operand_lanes: Callable[[int, int, int, bool], LaneMap] | None = field(repr=False)

    @property
    def k(self) -> int:
        """The instruction's K, when it does not depend on the operand type."""
        values = {k for ks in self.ks.values() for k in ks}
        if len(values) != 1:
            raise LayoutError(f"{self.name} takes K in {sorted(values)} depending on the operand type; use k_for(bits)")
        return values.pop()

    def k_for(self, bits: int) -> int:
        """The K of a register-operand instruction for `bits`-wide operands."""
        if bits not in self.ks:
            raise LayoutError(f"{self.name} has no {bits}-bit operands (supported: {sorted(self.ks)} bits)")
        ks = self.ks[bits]
        if len(ks) != 1:
            raise LayoutError(f"{self.name} takes K in {list(ks)} for {bits}-bit operands")
        return ks[0]

    @property
    def regs_per_atom(self) -> int:
        """Accumulator values per thread for one instruction (m * n / group_size)."""
        return self.m * self.n // self.group_size

    def operand_values(self, operand: str, bits: int) -> int:
        return self._rows(operand) * self.k_for(bits) // self.group_size

    # ---- instruction-level layouts --------------------------------------------------------------------------------
    def accumulator_map(self) -> Layout:
        """The documented formula as a Layout `(lane, value) -> (m, n)`."""
        return _lane_layout(self.accumulator_lanes, self.group_size, self.regs_per_atom)

    def accumulator_fragment(self) -> Fragment:
        """The m x n accumulator as a Fragment over the group's lanes (the inverse of accumulator_map)."""
        return self._atom(("accumulator",), lambda: _invert_lanes(self.accumulator_map(), f"{self.name} accumulator"))

    def operand_map(self, operand: str, bits: int, k_major: bool = True) -> Layout:
        """The documented formula as a Layout `(lane, value) -> (row, k)` for operand "A" (rows = m) or "B"
        (rows = n) with `bits`-wide elements, in the K-major (Row) or MN-major (Col) register layout."""
        if self.operand_lanes is None:
            raise LayoutError(f"{self.name} reads its operands from shared memory: it has no register operand layout "
                              "(use a swizzled shared-memory layout)")
        rows, k = self._rows(operand), self.k_for(bits)
        lanes = self.operand_lanes(rows, k, bits, k_major)
        return _lane_layout(lanes, self.group_size, rows * k // self.group_size)

    def operand_fragment(self, operand: str, bits: int, k_major: bool = True) -> Fragment:
        """The rows x k operand as a Fragment over the group's lanes."""
        form = "K-major" if k_major else "MN-major"
        return self._atom((operand, bits, k_major), lambda: _invert_lanes(self.operand_map(operand, bits, k_major),
                                                                           f"{self.name} {form} {bits}-bit {operand}"))

    def _atom(self, key: tuple, make: Callable[[], Fragment]) -> Fragment:
        """An instruction-level fragment, inverted once per instruction (every block gemm's layouts compose it, and
        a Fragment is immutable); a refusal is raised again each time."""
        atoms = self.__dict__.setdefault("_atoms", {})  # beside the frozen fields: not part of eq or repr
        if key not in atoms:
            atoms[key] = make()
        return atoms[key]

    def _rows(self, operand: str) -> int:
        if operand not in ("A", "B"):
            raise LayoutError(f"operand must be 'A' or 'B', got {operand!r}")
        return self.m if operand == "A" else self.n


def _lane_layout(lanes: LaneMap, group: int, values: int) -> Layout:
    t, v = make_vars(2, "tv")
    return Layout.from_exprs([group, values], [t, v], list(lanes(t, v)))


def _invert_lanes(lane_map: Layout, what: str) -> Fragment:
    try:
        inverse = lane_map.inverse()
    except LayoutError as err:
        raise LayoutError(f"{what}: the lane formula is not a bijection: {err}") from None
    fvars = make_vars(2)
    rename = dict(zip(inverse.forward_vars, fvars))
    thread, value = (substitute(e, rename) for e in inverse.forward_index)
    return Fragment.from_exprs(lane_map.output_shape, fvars, thread, value)


# ---- the formulas of MUSA_LAYOUTS.md ---------------------------------------------------------------------------------


def _wmma_accumulator(n: int) -> LaneMap:
    def lanes(t, v):  # section 1 C/D: v = v0 + (N/8) v1
        v0, v1 = v % (n // 8), v // (n // 8)
        return t // 8 + 4 * v1, t % 8 + 8 * v0

    return lanes


def _wmma_operand(rows: int, k: int, bits: int, k_major: bool) -> LaneMap:
    p = 32 // bits  # elements per 32-bit register
    if k_major:
        if k % (4 * p) or rows % 8:
            raise LayoutError(f"WMMA K-major {bits}-bit operand needs K % {4 * p} == 0 and rows % 8 == 0, "
                              f"got {rows} x {k}")
        kb = k // (4 * p)

        def lanes(t, v):  # v = v0 + p v1 + p (K / 4p) v2
            v0, v1, v2 = v % p, v // p % kb, v // (p * kb)
            return t // 4 + 8 * v2, p * (t % 4) + v0 + 4 * p * v1

        return lanes
    if k % (128 // bits) or rows % 8:
        raise LayoutError(f"WMMA MN-major {bits}-bit operand needs K % {128 // bits} == 0 and rows % 8 == 0, "
                          f"got {rows} x {k}")
    tb, rb = bits // 4, rows // 8

    def lanes(t, v):  # t = t0 + (b/4) t1, v = v0 + p v1 + p (R/8) v2
        t0, t1 = t % tb, t // tb
        v0, v1, v2 = v % p, v // p % rb, v // (p * rb)
        return p * t0 + v0 + 8 * v1, t1 + (128 // bits) * v2

    return lanes


def _mp22_accumulator(t, v):
    return ((t >> 3) & 3) + 4 * (t >> 6) + 8 * (v >> 1), (t & 7) + 8 * ((t >> 5) & 1) + 16 * (v & 1)


_MP22_OPERANDS: dict[tuple[int, bool], LaneMap] = {
    (16, True): lambda t, v: (((t >> 2) & 15) + 16 * (v >> 1), 2 * (t & 3) + (v & 1) + 8 * (t >> 6)),
    (16, False): lambda t, v: (2 * (t & 7) + (v & 1) + 16 * (v >> 1), t >> 3),
    (32, True): lambda t, v: (((t >> 2) & 15) + 16 * v, (t & 3) + 4 * (t >> 6)),
    (32, False): lambda t, v: ((t & 15) + 16 * v, t >> 4),
    (8, True): lambda t, v: (((t >> 2) & 15) + 16 * (v >> 2), 4 * (t & 3) + (v & 3) + 16 * (t >> 6)),
    (8, False): lambda t, v: (4 * (t & 3) + (v & 3) + 16 * (v >> 2), t >> 2),
}


def _mp22_operand(rows: int, k: int, bits: int, k_major: bool) -> LaneMap:
    return _MP22_OPERANDS[(bits, k_major)]


def _sqmma_accumulator(n: int) -> LaneMap:
    def lanes(t, v):  # section 3: w = t/32, l = t%32, v = v0 + 2 v1 + 2 (N/16) v2
        w, lane = t // 32, t % 32
        v0, v1, v2 = v % 2, v // 2 % (n // 16), v // (2 * (n // 16))
        return lane // 8 + 4 * w + 16 * v2, lane % 8 + 8 * v0 + 16 * v1

    return lanes


# ---- the registry ----------------------------------------------------------------------------------------------------

SQMMA_SHAPES = ((16, 64), (32, 32), (32, 64), (32, 128), (64, 16), (64, 32), (64, 64), (64, 128), (128, 32),
                (128, 64), (128, 128))
_SQMMA_TF32_SHAPES = ((16, 64), (32, 32), (32, 64), (64, 16), (64, 32), (64, 64), (128, 64), (128, 128))


def _build_registry() -> dict[str, MmaInstruction]:
    table: dict[str, MmaInstruction] = {}

    def add(inst: MmaInstruction) -> None:
        table[inst.name] = inst

    for m, n, k in ((16, 8, 8), (16, 8, 16), (8, 16, 16), (16, 16, 16), (16, 16, 32)):
        # 8-bit operands (s8/u8/fp8) exist on the K % 16 == 0 shapes, the ones section 1's formulas fit at p = 4
        ks = {16: (k,), 8: (k,)} if k % 16 == 0 else {16: (k,)}
        add(MmaInstruction(f"mp_31.wmma.m{m}n{n}k{k}", "mp_31", "wmma", 32, m, n, ks, _wmma_accumulator(n),
                           _wmma_operand))
    for k, bits in ((16, 16), (8, 32), (32, 8)):
        add(MmaInstruction(f"mp_22.mma.m32n32k{k}", "mp_22", "mma", 128, 32, 32, {bits: (k,)}, _mp22_accumulator,
                           _mp22_operand))
    for m, n in SQMMA_SHAPES:
        ks = {16: (16, 32, 64), 8: (32, 64, 128)}
        if (m, n) in _SQMMA_TF32_SHAPES:
            ks[32] = (8, 16, 32)
        add(MmaInstruction(f"mp_31.sqmma.m{m}n{n}", "mp_31", "sqmma", 128, m, n, ks, _sqmma_accumulator(n), None))
    return table


MMA_INSTRUCTIONS: dict[str, MmaInstruction] = _build_registry()


def get_mma_instruction(name: Any) -> MmaInstruction:
    """An instruction by registry name (an MmaInstruction passes through)."""
    if isinstance(name, MmaInstruction):
        return name
    inst = MMA_INSTRUCTIONS.get(name)
    if inst is None:
        raise LayoutError(f"unknown MMA instruction {name!r}; known: {', '.join(MMA_INSTRUCTIONS)}")
    return inst


def list_mma_instructions(arch: str | None = None, kind: str | None = None) -> list[MmaInstruction]:
    return [inst for inst in MMA_INSTRUCTIONS.values()
            if (arch is None or inst.arch == arch) and (kind is None or inst.kind == kind)]


# ---- block-level composition -----------------------------------------------------------------------------------------


def _tile(what: str, extent: Any, groups: Any, atom: int, axis: str, groups_name: str | None) -> tuple[int, int]:
    """(per-group tile, atoms per tile) along one axis, or a LayoutError naming the numbers."""
    try:
        extent, groups = operator.index(extent), operator.index(groups)
    except TypeError:
        extent = groups = 0
    if extent <= 0 or groups <= 0:
        raise LayoutError(f"{what}: {axis} and the group counts must be positive ints")
    if extent % (groups * atom):
        by = f"{groups_name}={groups} x {atom} (the instruction's {axis.lower()})" if groups_name else \
            f"the instruction's {axis.lower()}={atom}"
        raise LayoutError(f"{what}: {axis}={extent} is not a multiple of {by}")
    tile = extent // groups
    return tile, tile // atom


def make_gemm_accumulator_fragment(instruction: Any, M: int, N: int, g_m: int, g_n: int) -> Fragment:
    """The M x N accumulator of a block gemm whose g_m x g_n groups each run `instruction` (module docstring)."""
    inst = get_mma_instruction(instruction)
    if MMA_INSTRUCTIONS.get(inst.name) is inst and all(type(x) is int for x in (M, N, g_m, g_n)):
        return reuse_layout(("gemm accumulator", inst.name, M, N, g_m, g_n),
                            lambda: _gemm_accumulator_fragment(inst, M, N, g_m, g_n))
    return _gemm_accumulator_fragment(inst, M, N, g_m, g_n)


def _gemm_accumulator_fragment(inst: MmaInstruction, M: int, N: int, g_m: int, g_n: int) -> Fragment:
    what = f"gemm accumulator ({inst.name})"
    tile_m, _ = _tile(what, M, g_m, inst.m, "M", "g_m")
    tile_n, atoms_n = _tile(what, N, g_n, inst.n, "N", "g_n")
    atom = inst.accumulator_fragment()
    i, j = make_vars(2)
    gm, gn = i // tile_m, j // tile_n
    ai, aj = i % tile_m // inst.m, j % tile_n // inst.n
    local = [i % tile_m % inst.m, j % tile_n % inst.n]
    thread = (gm + g_m * gn) * inst.group_size + atom.thread(local)
    slot = (ai * atoms_n + aj) * inst.regs_per_atom + atom.index(local)
    return Fragment.from_exprs([M, N], [i, j], thread, slot)


def make_gemm_a_fragment(instruction: Any, M: int, K: int, g_m: int, g_n: int, *, bits: int = 16,
                         k_major: bool = True, transposed: bool = False) -> Fragment:
    """A (M x K, or K x M if `transposed`) held in registers for a block gemm (module docstring)."""
    return _operand_fragment(instruction, "A", M, K, g_m, g_n, bits, k_major, transposed)


def make_gemm_b_fragment(instruction: Any, N: int, K: int, g_m: int, g_n: int, *, bits: int = 16,
                         k_major: bool = True, transposed: bool = False) -> Fragment:
    """B (K x N, or N x K if `transposed`) held in registers for a block gemm (module docstring)."""
    return _operand_fragment(instruction, "B", N, K, g_m, g_n, bits, k_major, transposed)


def _operand_fragment(instruction: Any, operand: str, rows: int, K: int, g_m: int, g_n: int, bits: int,
                      k_major: bool, transposed: bool) -> Fragment:
    inst = get_mma_instruction(instruction)
    what = f"gemm {operand} fragment ({inst.name})"
    atom = inst.operand_fragment(operand, bits, k_major)
    k = inst.k_for(bits)
    row_atom = inst.m if operand == "A" else inst.n
    groups_along, groups_across = (g_m, g_n) if operand == "A" else (g_n, g_m)
    tile, _ = _tile(what, rows, groups_along, row_atom, *(("M", "g_m") if operand == "A" else ("N", "g_n")))
    _, atoms_k = _tile(what, K, 1, k, "K", None)
    # A's logical order is (M, K) and B's (K, N); `transposed` swaps them (T.gemm's transpose_A / transpose_B)
    rows_first = (operand == "A") != transposed
    r, kk = make_vars(2) if rows_first else reversed(make_vars(2))
    g = r // tile  # gm for A, gn for B
    a_row, a_k = r % tile // row_atom, kk // k
    local = [r % tile % row_atom, kk % k]
    rep = new_replicate_var()
    group = g + g_m * rep if operand == "A" else rep + g_m * g
    thread = group * inst.group_size + atom.thread(local)
    slot = (a_row * atoms_k + a_k) * inst.operand_values(operand, bits) + atom.index(local)
    shape, fvars = ([rows, K], [r, kk]) if rows_first else ([K, rows], [kk, r])
    return Fragment.from_exprs(shape, fvars, thread, slot, replicate=groups_across, replicate_var=rep)

