"""LowerTileOp: the tile ops that are plain loops (T.copy, T.fill, ...) become T.Parallel nests over their regions
before LayoutInference; the ops that need the chosen layouts (reductions, gemms) wait for the second, late run, which
in turn leaves the early ops alone. With TL_DISABLE_THREAD_STORAGE_SYNC, a fragment relaid out through a shared tile
(`T.copy(F, S); T.copy(S, G)`) gets a block barrier between the two copies."""

import tvm
import tvm_ffi
from tvm import tirx
from tvm.tirx.script import builder as Tb  # loops of kind kUnrolled (T.unroll is a serial loop with a pragma)

import tilelang
import tilelang.language as T
from conftest import without_locations
from tilelang_musa.ir.attrs import LAYOUTS_ATTR
from tilelang_musa.layout import Fragment
from tilelang_musa.target import determine_target
from tilelang_musa.transform.lower_tile_op import lower_tile_op

MP31 = determine_target("musa -arch=mp_31")
NO_SYNC = {tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True}


def _assert_lowers_to(before, expected, configs=None, late=False):
    after = without_locations(lower_tile_op(before, configs or {}, late))
    tvm.ir.assert_structural_equal(after, without_locations(expected).with_attr("global_symbol",
                                                                                 before.attrs["global_symbol"]))


@T.prim_func
def tile_ops(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32"), R: T.Tensor((64,), "float32")):
    T.func_attr({"target": MP31})
    with T.Kernel(4, threads=128) as bx:
        S = T.alloc_shared((16, 64), "float32")
        F = T.alloc_fragment((16, 64), "float32")
        F_sum = T.alloc_fragment((16,), "float32")
        T.fill(F, 1.0)
        T.copy(A[bx * 16, 0], S)
        T.copy(S, B[bx * 16:bx * 16 + 16, 0:64])
        T.reduce_sum(F, F_sum, dim=1)
        T.copy(F_sum, R[bx * 16:bx * 16 + 16])


@T.prim_func
def tile_ops_expected(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32"),
                      R: T.Tensor((64,), "float32")):
    T.func_attr({"target": MP31})
    with T.Kernel(4, threads=128) as bx:
        S = T.alloc_shared((16, 64), "float32")
        F = T.alloc_fragment((16, 64), "float32")
        F_sum = T.alloc_fragment((16,), "float32")
        for i, j in T.Parallel(16, 64):
            F[i, j] = 1.0
        for i, j in T.Parallel(16, 64):
            S[i, j] = A[bx * 16 + i, j]
        T.copy(S, B[bx * 16:bx * 16 + 16, 0:64])  # a TME store on mp_31: LowerTmeCopy's, after the layouts
        T.reduce_sum(F, F_sum, dim=1)  # lowered once the layouts are chosen
        for i in T.Parallel(16):
            R[bx * 16 + i] = F_sum[i]


def test_copies_and_fills_become_parallel_nests_and_the_ops_that_need_layouts_wait():
    _assert_lowers_to(tile_ops, tile_ops_expected)


def with_layouts(func, layouts):
    """`func` with `tl.fragment_layouts` naming its fragments (allocated in its body) by name."""
    allocated = {}

    def on_alloc(node):
        allocated[node.buffer.name] = node.buffer

    tvm_ffi.structural_walk(func.body, [(tirx.AllocBuffer, on_alloc)])
    return func.with_attr(LAYOUTS_ATTR, {allocated[name]: layout for name, layout in layouts.items()})


# LayoutInference's choice for a 4 x 32 tile over 32 threads: each row on 8 threads, 4 consecutive elements a thread;
# its row sums replicated on the row's 8 threads.
ROWS = Fragment([4, 32], forward_thread_fn=lambda i, j: i * 8 + j // 4, forward_index_fn=lambda i, j: j % 4)
ROW_SUMS = Fragment([4], forward_thread_fn=lambda i, rep: i * 8 + rep, forward_index_fn=lambda i: 0, replicate=8)


@T.prim_func
def row_sums(A: T.Tensor((4, 32), "float32"), R: T.Tensor((4,), "float32")):
    T.func_attr({"target": MP31})
    with T.Kernel(1, threads=32):
        F = T.alloc_fragment((4, 32), "float32")
        F_sum = T.alloc_fragment((4,), "float32")
        tx = T.get_thread_binding()
        for v in T.vectorized(4):
            F[tx // 8, tx % 8 * 4 + v] = A[tx // 8, tx % 8 * 4 + v]
        T.reduce_sum(F, F_sum, dim=1)
        R[tx // 8] = F_sum[tx // 8]


@T.prim_func
def row_sums_expected(A: T.Tensor((4, 32), "float32"), R: T.Tensor((4,), "float32")):
    T.func_attr({"target": MP31})
    with T.Kernel(1, threads=32):
        F = T.alloc_fragment((4, 32), "float32")
        F_sum = T.alloc_fragment((4,), "float32")
        tx = T.get_thread_binding()
        for v in T.vectorized(4):
            F[tx // 8, tx % 8 * 4 + v] = A[tx // 8, tx % 8 * 4 + v]
        F_sum_partial = T.alloc_local((1,), "float32")
        with Tb.unroll(0, 1) as slot:
            F_sum_partial[slot] = 0.0
        with Tb.unroll(0, 4) as src_slot:  # the thread's own 4 elements of its row
            F_sum_partial[0] = F_sum_partial[0] + F[tx // 8, tx % 8 * 4 + src_slot]
        with Tb.unroll(0, 1) as dst_slot:  # then across the row's 8 threads
            F_sum[tx // 8] = T.call_extern("float32", "tl::AllReduce<tl::SumOp, 8, 1, 32>", F_sum_partial[dst_slot],
                                           T.address_of(F_sum_partial[0]))
        R[tx // 8] = F_sum[tx // 8]


def test_the_late_run_lowers_a_reduction_by_the_chosen_layouts():
    before = with_layouts(row_sums, {"F": ROWS, "F_sum": ROW_SUMS})
    expected = with_layouts(row_sums_expected, {"F": ROWS, "F_sum": ROW_SUMS})
    after = lower_tile_op(before, {}, late=True)
    assert after.attrs[LAYOUTS_ATTR].same_as(before.attrs[LAYOUTS_ATTR])
    # (compared without the layouts: structural equality does not map a dict's buffer keys)
    tvm.ir.assert_structural_equal(without_locations(after.without_attr(LAYOUTS_ATTR)),
                                   without_locations(expected.without_attr(LAYOUTS_ATTR))
                                   .with_attr("global_symbol", "row_sums"))


def test_the_late_run_leaves_the_early_ops_alone():
    @T.prim_func
    def early_only(A: T.Tensor((64, 64), "float32"), S_out: T.Tensor((16, 64), "float32")):
        T.func_attr({"target": MP31})
        with T.Kernel(4, threads=128) as bx:
            S = T.alloc_shared((16, 64), "float32")
            T.copy(A[bx * 16, 0], S)
            T.fill(S_out, 0.0)

    _assert_lowers_to(early_only, early_only, late=True)


@T.prim_func
def round_trip(A: T.Tensor((16, 64), "float32")):
    T.func_attr({"target": MP31})
    with T.Kernel(1, threads=128):
        S = T.alloc_shared((16, 64), "float32")
        F = T.alloc_fragment((16, 64), "float32")
        G = T.alloc_fragment((16, 64), "float32")
        T.fill(F, 1.0)
        T.copy(F, S)
        T.copy(S, G)
        T.copy(G, A)


def round_trip_expected(barrier):
    @T.prim_func
    def expected(A: T.Tensor((16, 64), "float32")):
        T.func_attr({"target": MP31})
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((16, 64), "float32")
            F = T.alloc_fragment((16, 64), "float32")
            G = T.alloc_fragment((16, 64), "float32")
            for i, j in T.Parallel(16, 64):
                F[i, j] = 1.0
            for i, j in T.Parallel(16, 64):
                S[i, j] = F[i, j]
            if barrier:
                T.tvm_storage_sync("shared")
            for i, j in T.Parallel(16, 64):
                G[i, j] = S[i, j]
            for i, j in T.Parallel(16, 64):
                A[i, j] = G[i, j]

    return expected


def test_a_round_trip_through_shared_memory_keeps_a_barrier_without_storage_sync():
    """F's and G's layouts (chosen later) may put an element on two threads, and no barrier pass will run; with
    them (the default) ThreadSync places the barrier."""
    _assert_lowers_to(round_trip, round_trip_expected(barrier=True), NO_SYNC)
    _assert_lowers_to(round_trip, round_trip_expected(barrier=False))
