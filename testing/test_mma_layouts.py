"""MMA register layouts and the block-level gemm composition, checked on every (thread, value) pair.

The expected lane maps are written here again from the text of MUSA_LAYOUTS.md sections 1-3 (digit
decompositions spelled out with divmod), independently of tilelang_musa.layout.mma_layouts, and the block
composition is recomputed from the contract in that module's docstring.
"""

import itertools

import numpy as np
import pytest

from tilelang_musa.layout import (MMA_INSTRUCTIONS, SQMMA_SHAPES, GemmWarpPolicy, LayoutError, get_mma_instruction,
                                  list_mma_instructions, make_gemm_a_fragment, make_gemm_accumulator_fragment,
                                  make_gemm_b_fragment, reduce_fragment, reduce_threads, sqmma_warp_grid)

WMMA = {"m16n8k8": (16, 8, 8), "m16n8k16": (16, 8, 16), "m8n16k16": (8, 16, 16), "m16n16k16": (16, 16, 16),
        "m16n16k32": (16, 16, 32)}
# f16 registers (32-bit) A / B / C per shape (section 1), and for s8 (mutlass MP31_*_S32S8S8S32)
WMMA_F16_REGS = {"m16n8k8": (2, 1, 4), "m16n8k16": (4, 2, 4), "m8n16k16": (2, 4, 4), "m16n16k16": (4, 4, 8),
                 "m16n16k32": (8, 8, 8)}
WMMA_S8_REGS = {"m16n8k16": (2, 1), "m8n16k16": (1, 2), "m16n16k16": (2, 2), "m16n16k32": (4, 4)}


# ---- the documented formulas, written out again ---------------------------------------------------------------------


def doc_wmma_c(t, v, n):
    v1, v0 = divmod(v, n // 8)  # v = v0 + (N/8) v1
    return t // 8 + 4 * v1, t % 8 + 8 * v0


def doc_wmma_operand(t, v, rows, k, bits, k_major):
    p = 32 // bits
    if k_major:  # v = v0 + p v1 + p (K/(4p)) v2
        v2, rest = divmod(v, p * (k // (4 * p)))
        v1, v0 = divmod(rest, p)
        return t // 4 + 8 * v2, p * (t % 4) + v0 + 4 * p * v1
    t1, t0 = divmod(t, bits // 4)  # t = t0 + (b/4) t1
    v2, rest = divmod(v, p * (rows // 8))  # v = v0 + p v1 + p (R/8) v2
    v1, v0 = divmod(rest, p)
    return p * t0 + v0 + 8 * v1, t1 + (128 // bits) * v2


def doc_mp22_c(t, v):
    return ((t >> 3) & 3) + 4 * (t >> 6) + 8 * (v >> 1), (t & 7) + 8 * ((t >> 5) & 1) + 16 * (v & 1)


def doc_mp22_operand(t, v, bits, k_major):
    if bits == 16:
        if k_major:
            return ((t >> 2) & 15) + 16 * (v >> 1), 2 * (t & 3) + (v & 1) + 8 * (t >> 6)
        return 2 * (t & 7) + (v & 1) + 16 * (v >> 1), t >> 3
    if bits == 32:
        if k_major:
            return ((t >> 2) & 15) + 16 * v, (t & 3) + 4 * (t >> 6)
        return (t & 15) + 16 * v, t >> 4
    if k_major:
        return ((t >> 2) & 15) + 16 * (v >> 2), 4 * (t & 3) + (v & 3) + 16 * (t >> 6)
    return 4 * (t & 3) + (v & 3) + 16 * (v >> 2), t >> 2


def doc_sqmma_c(t, v, n):
    w, lane = divmod(t, 32)
    v2, rest = divmod(v, 2 * (n // 16))  # v = v0 + 2 v1 + 2 (N/16) v2
    v1, v0 = divmod(rest, 2)
    return lane // 8 + 4 * w + 16 * v2, lane % 8 + 8 * v0 + 16 * v1


def doc_accumulator(inst):
    if inst.kind == "wmma":
        return lambda t, v: doc_wmma_c(t, v, inst.n)
    if inst.kind == "mma":
        return doc_mp22_c
    return lambda t, v: doc_sqmma_c(t, v, inst.n)


def doc_operand(inst, operand, bits, k_major):
    rows = inst.m if operand == "A" else inst.n
    if inst.kind == "wmma":
        return lambda t, v: doc_wmma_operand(t, v, rows, inst.k_for(bits), bits, k_major)
    return lambda t, v: doc_mp22_operand(t, v, bits, k_major)


def tv_grid(group, values):
    t, v = np.meshgrid(np.arange(group), np.arange(values), indexing="ij")
    return t.reshape(-1), v.reshape(-1)


def check_fragment_against_doc(frag, lanes, group, values, rows, cols):
    """The derived fragment puts doc element lanes(t, v) in lane t, slot v, and the map covers rows x cols."""
    t, v = tv_grid(group, values)
    r, c = np.vectorize(lanes)(t, v)
    assert r.min() >= 0 and r.max() < rows and c.min() >= 0 and c.max() < cols
    assert np.unique(r * cols + c).size == rows * cols == t.size  # a bijection (t, v) <-> (r, c)
    thread, slot = frag.evaluate(r, c)
    assert np.array_equal(thread, t) and np.array_equal(slot, v)
    assert (frag.num_threads, frag.local_size, frag.input_shape) == (group, values, [rows, cols])


# ---- instruction level -----------------------------------------------------------------------------------------------


def test_registry_has_one_entry_per_instruction():
    assert {i.name for i in list_mma_instructions(kind="wmma")} == {f"mp_31.wmma.{s}" for s in WMMA}
    assert {i.name for i in list_mma_instructions(arch="mp_22")} == {
        "mp_22.mma.m32n32k16", "mp_22.mma.m32n32k8", "mp_22.mma.m32n32k32"}
    assert {(i.m, i.n) for i in list_mma_instructions(kind="sqmma")} == set(SQMMA_SHAPES) and len(SQMMA_SHAPES) == 11
    assert len(MMA_INSTRUCTIONS) == 5 + 3 + 11
    assert get_mma_instruction("mp_31.sqmma.m64n128").ks[16] == (16, 32, 64)
    assert 32 not in get_mma_instruction("mp_31.sqmma.m32n128").ks  # no tf32 at 32 x 128
    assert get_mma_instruction("mp_22.mma.m32n32k8").k_for(32) == 8
    with pytest.raises(LayoutError, match="unknown MMA instruction 'mp_31.wmma.m8n8k4'"):
        get_mma_instruction("mp_31.wmma.m8n8k4")


@pytest.mark.parametrize("name", sorted(MMA_INSTRUCTIONS))
def test_accumulator_fragment_matches_the_documented_formula(name):
    inst = get_mma_instruction(name)
    assert inst.regs_per_atom == inst.m * inst.n // inst.group_size
    if inst.kind == "wmma":
        assert inst.regs_per_atom == WMMA_F16_REGS[name.split(".")[-1]][2]
    if inst.kind == "mma":
        assert inst.regs_per_atom == 8
    check_fragment_against_doc(inst.accumulator_fragment(), doc_accumulator(inst), inst.group_size,
                               inst.regs_per_atom, inst.m, inst.n)


def test_instruction_fragments_are_inverted_once_per_instruction():
    """Every block gemm composes its instruction's fragments: they are kept on the instruction (by operand, bits and
    major-ness), equal to a fresh inversion of the documented formula, and kept apart from each other."""
    import dataclasses

    inst = get_mma_instruction("mp_22.mma.m32n32k8")
    assert inst.accumulator_fragment() is inst.accumulator_fragment()
    fresh = dataclasses.replace(inst)  # the same instruction, nothing kept yet
    assert fresh == inst and fresh.accumulator_fragment() is not inst.accumulator_fragment()
    assert fresh.accumulator_fragment().is_equal(inst.accumulator_fragment())
    a, b = inst.operand_fragment("A", 32, True), inst.operand_fragment("B", 32, True)
    assert a is inst.operand_fragment("A", 32, True) and a is not b
    assert inst.operand_fragment("A", 32, False) is not a
    with pytest.raises(LayoutError, match="no 16-bit operands"):  # a refusal is raised every time
        inst.operand_fragment("A", 16, True)
    with pytest.raises(LayoutError, match="no 16-bit operands"):
        inst.operand_fragment("A", 16, True)


REGISTER_OPERANDS = [(name, op, bits, k_major) for name, inst in sorted(MMA_INSTRUCTIONS.items())
                     if inst.operand_lanes is not None for bits in inst.ks for op in "AB" for k_major in (True, False)]


@pytest.mark.parametrize("name, operand, bits, k_major", REGISTER_OPERANDS)
def test_operand_fragment_matches_the_documented_formula(name, operand, bits, k_major):
    inst = get_mma_instruction(name)
    rows = inst.m if operand == "A" else inst.n
    values = inst.operand_values(operand, bits)
    check_fragment_against_doc(inst.operand_fragment(operand, bits, k_major), doc_operand(inst, operand, bits, k_major),
                               inst.group_size, values, rows, inst.k_for(bits))


def test_operand_register_counts_match_the_documented_tables():
    for shape, (a, b, _) in WMMA_F16_REGS.items():
        inst = get_mma_instruction(f"mp_31.wmma.{shape}")
        assert (inst.operand_values("A", 16), inst.operand_values("B", 16)) == (2 * a, 2 * b)
    for shape, (a, b) in WMMA_S8_REGS.items():
        inst = get_mma_instruction(f"mp_31.wmma.{shape}")
        assert (inst.operand_values("A", 8), inst.operand_values("B", 8)) == (4 * a, 4 * b)
    assert 8 not in get_mma_instruction("mp_31.wmma.m16n8k8").ks
    for name, bits in (("mp_22.mma.m32n32k16", 16), ("mp_22.mma.m32n32k8", 32), ("mp_22.mma.m32n32k32", 8)):
        assert get_mma_instruction(name).operand_values("A", bits) == 2 * 32 // bits  # A[2], B[2]


def test_sqmma_has_no_register_operand_layout():
    with pytest.raises(LayoutError, match="reads its operands from shared memory"):
        get_mma_instruction("mp_31.sqmma.m64n64").operand_fragment("A", 16)
    with pytest.raises(LayoutError, match="takes K in"):
        _ = get_mma_instruction("mp_31.sqmma.m64n64").k


# ---- block level: the contract of mma_layouts' docstring ------------------------------------------------------------


def doc_inverse(lanes, group, values):
    """{(row, col): (lane, value)} from the documented forward formula."""
    return {tuple(int(x) for x in lanes(t, v)): (t, v) for t in range(group) for v in range(values)}


def expected_accumulator(inst, M, N, g_m, g_n):
    where = doc_inverse(doc_accumulator(inst), inst.group_size, inst.regs_per_atom)
    tm, tn = M // g_m, N // g_n
    atoms_n = tn // inst.n
    thread = np.zeros((M, N), dtype=np.int64)
    slot = np.zeros((M, N), dtype=np.int64)
    for i, j in itertools.product(range(M), range(N)):
        gm, ii = divmod(i, tm)
        gn, jj = divmod(j, tn)
        ai, mi = divmod(ii, inst.m)
        aj, nj = divmod(jj, inst.n)
        t, v = where[(mi, nj)]
        thread[i, j] = (gm + g_m * gn) * inst.group_size + t
        slot[i, j] = (ai * atoms_n + aj) * inst.regs_per_atom + v
    return thread, slot


ACCUMULATOR_CASES = [
    ("mp_31.wmma.m16n8k16", 64, 64, 2, 2), ("mp_31.wmma.m16n8k16", 96, 48, 2, 2),
    ("mp_31.wmma.m16n16k16", 48, 80, 3, 1), ("mp_31.wmma.m8n16k16", 32, 64, 1, 4),
    ("mp_22.mma.m32n32k16", 64, 96, 2, 1), ("mp_22.mma.m32n32k8", 64, 64, 1, 2),
    ("mp_31.sqmma.m64n128", 128, 256, 2, 2), ("mp_31.sqmma.m16n64", 16, 192, 1, 1),
    ("mp_31.sqmma.m64n16", 192, 32, 3, 2),
]


@pytest.mark.parametrize("name, M, N, g_m, g_n", ACCUMULATOR_CASES)
def test_block_accumulator_follows_the_contract_and_covers_c_once(name, M, N, g_m, g_n):
    inst = get_mma_instruction(name)
    frag = make_gemm_accumulator_fragment(name, M, N, g_m, g_n)
    thread, slot = expected_accumulator(inst, M, N, g_m, g_n)
    got_thread, got_slot = frag.evaluate_all()
    assert np.array_equal(got_thread[..., 0], thread) and np.array_equal(got_slot[..., 0], slot)
    assert frag.num_threads == g_m * g_n * inst.group_size
    assert frag.local_size == M * N // frag.num_threads
    keys = thread * frag.local_size + slot  # every (thread, slot) of the block holds exactly one C element
    assert np.array_equal(np.sort(keys.reshape(-1)), np.arange(frag.num_threads * frag.local_size))


@pytest.mark.parametrize("name, M, N, g_m, g_n", ACCUMULATOR_CASES)
def test_block_accumulator_inverse_gives_the_element_of_each_thread_slot(name, M, N, g_m, g_n):
    frag = make_gemm_accumulator_fragment(name, M, N, g_m, g_n)
    inv = frag.inverse()
    local, thread = (c.reshape(-1) for c in np.meshgrid(np.arange(frag.local_size), np.arange(frag.num_threads),
                                                        indexing="ij"))
    i, j, rep = inv.evaluate(local, thread)
    t2, s2 = frag.evaluate(i, j)
    assert np.array_equal(t2, thread) and np.array_equal(s2, local) and not rep.any()


OPERAND_CASES = [
    ("mp_31.wmma.m16n8k16", "A", 64, 64, 32, 2, 2, 16, True, False),
    ("mp_31.wmma.m16n8k16", "A", 64, 64, 32, 2, 2, 16, False, True),
    ("mp_31.wmma.m16n8k16", "B", 64, 64, 32, 2, 2, 16, True, True),
    ("mp_31.wmma.m16n8k16", "B", 32, 48, 48, 1, 3, 8, False, False),
    ("mp_31.wmma.m16n16k32", "A", 48, 32, 64, 3, 1, 16, True, False),
    ("mp_22.mma.m32n32k16", "B", 64, 64, 32, 2, 2, 16, False, False),
    ("mp_22.mma.m32n32k32", "A", 64, 32, 64, 2, 1, 8, True, True),
]


@pytest.mark.parametrize("name, operand, M, N, K, g_m, g_n, bits, k_major, transposed", OPERAND_CASES)
def test_block_operand_fragment_follows_the_contract(name, operand, M, N, K, g_m, g_n, bits, k_major, transposed):
    inst = get_mma_instruction(name)
    k = inst.k_for(bits)
    rows, row_atom = (M, inst.m) if operand == "A" else (N, inst.n)
    tile = rows // (g_m if operand == "A" else g_n)
    vals = inst.operand_values(operand, bits)
    where = doc_inverse(doc_operand(inst, operand, bits, k_major), inst.group_size, vals)
    if operand == "A":
        frag = make_gemm_a_fragment(name, M, K, g_m, g_n, bits=bits, k_major=k_major, transposed=transposed)
    else:
        frag = make_gemm_b_fragment(name, N, K, g_m, g_n, bits=bits, k_major=k_major, transposed=transposed)
    rows_first = (operand == "A") != transposed
    assert frag.input_shape == ([rows, K] if rows_first else [K, rows])
    assert frag.replicate_size == (g_n if operand == "A" else g_m)
    thread, slot = frag.evaluate_all()
    for r, kk in itertools.product(range(rows), range(K)):
        g, rr = divmod(r, tile)
        a_row, mi = divmod(rr, row_atom)
        a_k, ki = divmod(kk, k)
        t, v = where[(mi, ki)]
        groups = [g + g_m * rep for rep in range(g_n)] if operand == "A" else [rep + g_m * g for rep in range(g_m)]
        at = (r, kk) if rows_first else (kk, r)
        assert sorted(thread[at]) == [grp * inst.group_size + t for grp in groups]
        assert set(slot[at]) == {(a_row * (K // k) + a_k) * vals + v}
    assert frag.is_injective() and frag.is_bijective()


def test_block_composition_errors_name_the_numbers():
    with pytest.raises(LayoutError, match=r"N=40 is not a multiple of g_n=2 x 8 \(the instruction's n\)"):
        make_gemm_accumulator_fragment("mp_31.wmma.m16n8k16", 64, 40, 2, 2)
    with pytest.raises(LayoutError, match=r"K=24 is not a multiple of the instruction's k=16"):
        make_gemm_a_fragment("mp_31.wmma.m16n8k16", 64, 24, 2, 2)
    with pytest.raises(LayoutError, match="has no 8-bit operands"):
        make_gemm_b_fragment("mp_22.mma.m32n32k16", 64, 32, 2, 2, bits=8)


def test_accumulator_reduction_over_n_is_an_xor_butterfly_within_the_group():
    # flash-attention's row max over a WMMA accumulator: the 8 lanes sharing a row are t % 8 = 0..7 (section 1),
    # across 2 groups along N
    acc = make_gemm_accumulator_fragment("mp_31.wmma.m16n8k16", 64, 64, 2, 2)
    plan = reduce_threads(acc, 1)
    assert [(s.count, s.scale) for s in plan.splits] == [(8, 1), (2, 64)] and plan.butterfly
    row = reduce_fragment(acc, 1)
    assert row.input_shape == [64] and row.replicate_size == 16 and row.num_threads == 128
    thread, _ = acc.evaluate_all()
    kept, _ = row.evaluate_all()
    assert all(set(thread[i].reshape(-1)) == set(kept[i]) for i in range(64))


# ---- partition -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy, M, N, groups, atom, expected", [
    (GemmWarpPolicy.Square, 128, 128, 4, (16, 8), (2, 2)),
    (GemmWarpPolicy.Square, 64, 256, 8, (16, 8), (2, 4)),
    (GemmWarpPolicy.Square, 256, 64, 4, (16, 8), (4, 1)),
    (GemmWarpPolicy.FullRow, 128, 128, 4, (16, 8), (4, 1)),
    (GemmWarpPolicy.FullRow, 64, 256, 8, (16, 8), (4, 2)),  # 8 groups would give 8-row tiles: fall back to 4
    (GemmWarpPolicy.FullCol, 128, 128, 4, (16, 8), (1, 4)),
    (GemmWarpPolicy.FullCol, 128, 16, 4, (16, 8), (2, 2)),
    (GemmWarpPolicy.Square, 128, 256, 4, (64, 128), (2, 2)),  # SQMMA squads
    (GemmWarpPolicy.FullRow, 64, 64, 1, (32, 32), (1, 1)),
])
def test_partition_policies(policy, M, N, groups, atom, expected):
    g_m, g_n = policy.partition(M, N, groups, *atom)
    assert (g_m, g_n) == expected
    assert g_m * g_n == groups and M % (g_m * atom[0]) == 0 and N % (g_n * atom[1]) == 0


def test_every_partition_a_policy_returns_tiles_by_whole_atoms():
    sizes = itertools.product(GemmWarpPolicy, (16, 32, 48, 64, 128), (16, 32, 64, 96), (1, 2, 4, 8))
    for policy, M, N, groups in sizes:
        try:
            g_m, g_n = policy.partition(M, N, groups, 16, 8)
        except LayoutError as err:
            assert "no way to split" in str(err)
            assert not any(M % (m * 16) == 0 and N % ((groups // m) * 8) == 0
                           for m in range(1, groups + 1) if groups % m == 0)
            continue
        assert g_m * g_n == groups and M % (g_m * 16) == 0 and N % (g_n * 8) == 0


def test_partition_errors_and_sqmma_warp_grid():
    with pytest.raises(LayoutError, match="no way to split the 48 x 48 tile over 4 instruction groups"):
        GemmWarpPolicy.Square.partition(48, 48, 4, 32, 32)
    with pytest.raises(LayoutError, match="num_groups must be a positive int"):
        GemmWarpPolicy.Square.partition(64, 64, 0, 16, 8)
    assert sqmma_warp_grid(2, 2) == (8, 2)
    assert GemmWarpPolicy(1) is GemmWarpPolicy.FullRow and GemmWarpPolicy.FullRow.is_full_row()
