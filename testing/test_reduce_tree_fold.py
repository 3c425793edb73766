"""T.reduce_max / min / absmax fold a thread's own elements as a pairwise tree (tileop/reduce.py `_tree_fold`,
issue 40): one statement a result, log2(slots) + 1 deep instead of a chain of `slots` statements, the same values
(the combines pick an operand). Sums keep the serial fold (their rounding depends on the order). Checked as IR,
as MUSA C and as the simulator's dependence-depth charge on both arches, and against torch."""

import re

import pytest
import torch
import tvm
from tvm.tirx.script import builder as Tb

import tilelang
import tilelang.language as T
from conftest import poison, rand, without_locations
from test_dependence_depth import charges, checked_source
from test_reduce import COMBINE, REF, reduce_program
from test_transform_lower_tile_op import MP31, ROW_SUMS, ROWS, with_layouts
from tilelang_musa.ir.attrs import LAYOUTS_ATTR
from tilelang_musa.transform.lower_tile_op import lower_tile_op

ARCHS = ["mp_22", "mp_31"]


@T.prim_func
def row_maxes(A: T.Tensor((4, 32), "float32"), R: T.Tensor((4,), "float32")):
    T.func_attr({"target": MP31})
    with T.Kernel(1, threads=32):
        F = T.alloc_fragment((4, 32), "float32")
        F_max = T.alloc_fragment((4,), "float32")
        tx = T.get_thread_binding()
        for v in T.vectorized(4):
            F[tx // 8, tx % 8 * 4 + v] = A[tx // 8, tx % 8 * 4 + v]
        T.reduce_max(F, F_max, dim=1)
        R[tx // 8] = F_max[tx // 8]


@T.prim_func
def row_maxes_expected(A: T.Tensor((4, 32), "float32"), R: T.Tensor((4,), "float32")):
    T.func_attr({"target": MP31})
    with T.Kernel(1, threads=32):
        F = T.alloc_fragment((4, 32), "float32")
        F_max = T.alloc_fragment((4,), "float32")
        tx = T.get_thread_binding()
        for v in T.vectorized(4):
            F[tx // 8, tx % 8 * 4 + v] = A[tx // 8, tx % 8 * 4 + v]
        F_max_partial = T.alloc_local((1,), "float32")
        with Tb.unroll(0, 1) as slot:
            F_max_partial[slot] = T.ninf("float32")  # the identity of max: -inf
        # the thread's own 4 elements of its row, pairwise: max(max(x0, x1), max(x2, x3))
        F_max_partial[0] = T.max(F_max_partial[0], T.max(T.max(F[tx // 8, tx % 8 * 4], F[tx // 8, tx % 8 * 4 + 1]),
                                                         T.max(F[tx // 8, tx % 8 * 4 + 2], F[tx // 8, tx % 8 * 4 + 3])))
        with Tb.unroll(0, 1) as dst_slot:  # then across the row's 8 threads, as before
            F_max[tx // 8] = T.call_extern("float32", "tl::AllReduce<tl::MaxOp, 8, 1, 32>", F_max_partial[dst_slot],
                                           T.address_of(F_max_partial[0]))
        R[tx // 8] = F_max[tx // 8]


def test_a_row_max_folds_its_slots_as_a_tree():
    before = with_layouts(row_maxes, {"F": ROWS, "F_max": ROW_SUMS})
    expected = with_layouts(row_maxes_expected, {"F": ROWS, "F_max": ROW_SUMS})
    after = lower_tile_op(before, {}, late=True)
    tvm.ir.assert_structural_equal(without_locations(after.without_attr(LAYOUTS_ATTR)),
                                   without_locations(expected.without_attr(LAYOUTS_ATTR))
                                   .with_attr("global_symbol", "row_maxes"))


FOLD = {"max": "tl::max", "absmax": "tl::max", "min": "tl::min"}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind", ["max", "min", "absmax"])
def test_the_fold_is_one_statement_a_result_log_deep(arch, kind):
    """32 x 64 over 128 threads, along rows: however the arch's layout deals the rows out, each of a thread's
    results is one fold statement over its slots, charged log2(slots) + 1 deep (one more for |x|)."""
    checked, device = checked_source(reduce_program(kind, 32, 64, 1, True, 128), arch)
    folds = re.findall(r"R_partial\[(\d+)\] = (" + re.escape(FOLD[kind]) + r"\(R_partial\[\1\], .*);", device)
    assert folds, device
    results = len(folds)
    slots = len(re.findall(r"\bF\[\d+\]", "".join(f for _, f in folds))) // results
    assert slots >= 4 and results * slots == 32 * 64 // 128
    # not the serial chain: no statement folds one element into the partial
    assert not re.search(re.escape(FOLD[kind]) + r"\(R_partial\[\d+\], (?:tl::abs\()?F\[\d+\]\)?\);", device)
    # the simulator charges each fold statement `slots` combines (plus |x| for absmax), log2(slots) + 1 deep
    depth = (slots - 1).bit_length() + 1 + (kind == "absmax")
    fold_charges = [c for c in charges(checked) if c[1] == depth]
    assert len(fold_charges) >= results, charges(checked)


@pytest.mark.parametrize("arch", ARCHS)
def test_sums_keep_the_serial_fold(arch):
    _, device = checked_source(reduce_program("sum", 32, 64, 1, True, 128), arch)
    assert "R_partial[0] = R_partial[0] + F[1];" in device, device


# rows (dim 1) and columns (dim 0: several results a thread), clear and accumulate, max / min / absmax
CASES = [("max", 1, True), ("max", 0, False), ("min", 0, True), ("min", 1, False), ("absmax", 1, True),
         ("absmax", 0, False)]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind,dim,clear", CASES)
def test_tree_folded_reductions_match_torch(arch, kind, dim, clear):
    M, N = 64, 64
    kernel = tilelang.compile(reduce_program(kind, M, N, dim, clear, 128), target=f"musa -arch={arch}")
    assert f"{FOLD[kind]}({FOLD[kind]}(" in kernel.get_device_source()  # the tree's inner combines
    a = rand((M, N), torch.float32, 11)
    a[5, 7] = a[5, 9] = a[5].abs().max() + 1.0  # a tie for one row's maximum
    init = rand((M if dim == 1 else N,), torch.float32, 12)
    o = poison((M if dim == 1 else N,), torch.float32) if clear else init.clone()
    kernel(a, o)
    expected = REF[kind](a, dim)
    if not clear:
        expected = COMBINE[kind](init, expected)
    assert torch.equal(o, expected)  # max / min pick an element: exact


def test_a_fold_whose_slots_need_the_thread_range_is_a_tree_too():
    """FlashAttention's row max on mp_22 (64 x 32 scores from a warp MMA, 128 threads): which partial a slot folds
    into is a constant only given the thread's range [0, 128); the fold is still one tree statement a result."""
    from test_flash_attention import program

    prog = program(dim=64, layout="bhsd", block_M=64, block_N=32, num_stages=1, threads=128)
    source = tilelang.compile(prog, target="musa -arch=mp_22").get_kernel_source()
    assert "scores_max_partial[0] = tl::max(scores_max_partial[0], tl::max(acc_s[0], acc_s[1]));" in source
