"""ChooseSharedSwizzle: a shared tile only element accesses touch is stored in the bank swizzle (upstream's 128-, 64-
or 32-byte) whose warp requests take the fewest wavefronts, when that is fewer than row-major's; a tile a call takes
by address (a gemm operand) keeps its layout."""

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.ir.attrs import LAYOUTS_ATTR
from tilelang_musa.layout import make_full_bank_swizzled_layout
from tilelang_musa.target import determine_target
from tilelang_musa.transform.choose_shared_swizzle import choose_shared_swizzle

MP31 = determine_target("musa -arch=mp_31")


@T.prim_func
def column_walk(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32, 32), "float32")):
    T.func_attr({"target": MP31, LAYOUTS_ATTR: {}})
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        S = T.alloc_buffer((32, 32), "float32", scope="shared.dyn")
        for j in range(32):
            S[tx, j] = A[tx, j]  # lane tx writes row tx: every lane in bank j
        for j in range(32):
            B[j, tx] = S[j, tx]


def test_a_tile_whose_lanes_meet_in_one_bank_is_swizzled():
    """Row-major, the 32 lanes of each store land in one bank (32 wavefronts); the 128-byte swizzle spreads the 8
    rows of a period over 8 chunks (4 wavefronts); the loads, along a row, stay conflict-free."""
    after = choose_shared_swizzle(column_walk)
    (tile, layout), = after.attrs[LAYOUTS_ATTR].items()
    assert tile.name == "S"
    tvm.ir.assert_structural_equal(layout, make_full_bank_swizzled_layout(tile))


@T.prim_func
def row_walk(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32, 32), "float32")):
    T.func_attr({"target": MP31, LAYOUTS_ATTR: {}})
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        S = T.alloc_buffer((32, 32), "float32", scope="shared.dyn")
        for j in range(32):
            S[j, tx] = A[j, tx]
        for j in range(32):
            B[j, tx] = S[j, tx]


@T.prim_func
def handed_by_address(A: T.Buffer((32, 32), "float32")):
    T.func_attr({"target": MP31, LAYOUTS_ATTR: {}})
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        S = T.alloc_buffer((32, 32), "float32", scope="shared.dyn")
        for j in range(32):
            S[tx, j] = A[tx, j]
        T.call_extern("int32", "consume", T.address_of(S[0, 0]))


@pytest.mark.parametrize("func", [row_walk, handed_by_address], ids=["conflict_free", "by_address"])
def test_tiles_without_conflicts_or_read_by_address_keep_row_major(func):
    after = choose_shared_swizzle(func)
    assert dict(after.attrs[LAYOUTS_ATTR]) == {}


def splitk_epilogue(arch, row_major=False, M=128, N=128, K=128, block=64, split=2):
    """Split-K's epilogue: the accumulator through a shared tile, then atomics from it (`row_major`: the tile
    annotated row-major, which the pass keeps)."""
    threads = 128

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // block, M // block, split, threads=threads) as (bx, by, bz):
            A_s = T.alloc_shared((block, 32), "float16")
            B_s = T.alloc_shared((32, block), "float16")
            C_s = T.alloc_shared((block, block), "float32")
            C_l = T.alloc_fragment((block, block), "float32")
            if row_major:
                T.annotate_layout({C_s: T.Layout((block, block), lambda i, j: i * block + j)})
            T.clear(C_l)
            for ko in T.Pipelined(K // split // 32, num_stages=2):
                T.copy(A[by * block, bz * (K // split) + ko * 32], A_s)
                T.copy(B[bz * (K // split) + ko * 32, bx * block], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C_s)
            for i, j in T.Parallel(block, block):
                T.atomic_add(C[by * block + i, bx * block + j], C_s[i, j])

    return tilelang.compile(main, target=f"musa -arch={arch}")


def wavefronts(kernel):
    """(wavefronts taken, the fewest possible) of one run, and the run's result checked."""
    a, b = rand((128, 128), torch.float16, 1), rand((128, 128), torch.float16, 2)
    c = torch.zeros(128, 128)
    counters = kernel.get_profiler().counters([a, b, c])
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)
    return (counters.shared_load_wavefronts + counters.shared_store_wavefronts,
            counters.shared_load_ideal_wavefronts + counters.shared_store_ideal_wavefronts)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_the_split_k_epilogue_tile_meets_fewer_bank_conflicts(arch):
    """The accumulator's lanes write 8 consecutive columns of several rows: row-major, those rows share banks."""
    kernel = splitk_epilogue(arch)
    store = next(line for line in kernel.get_kernel_source().splitlines() if line.strip().startswith("C_s["))
    assert "^" in store, store  # the swizzle's xor in the tile's index
    taken, ideal = wavefronts(kernel)
    row_major, _ = wavefronts(splitk_epilogue(arch, row_major=True))
    assert ideal <= taken < row_major, (ideal, taken, row_major)


def test_a_plain_transpose_through_shared_memory_is_swizzled():
    """testing/test_sim_counters.py's transpose without its hand-written xor: a column of S per step, row-major one
    bank (32 wavefronts a request); the compiler's swizzle spreads each column over 8 banks."""
    @T.prim_func
    def main(A: T.Tensor((32, 32), "float32"), B: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            S = T.alloc_shared((32, 32), "float32")
            for i in T.serial(32):
                S[i, tx] = A[i, tx]
            for i in T.serial(32):
                B[i, tx] = S[tx, i]

    kernel = tilelang.compile(main, target="musa -arch=mp_31")
    a, b = rand((32, 32), torch.float32, 5), poison((32, 32), torch.float32)
    counters = kernel.get_profiler().counters([a, b])
    torch.testing.assert_close(b, a.T)
    assert counters.shared_store_wavefronts == 32  # the row stores stay conflict-free
    assert counters.shared_load_wavefronts < 32 * 32 // 4, counters.shared_load_wavefronts
