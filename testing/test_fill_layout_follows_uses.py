"""T.clear / T.fill place no constraint on a fragment's layout (upstream's fill takes whatever its fragment gets):
the fragment's other uses choose, and the fill runs where they put it. Before, the clear's nest was the first open
nest and chose: a 1-wide partition (a fill has no global access to vectorize), which the accumulating loop after
it then followed, its global loads strided and scalar."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.ir.attrs import PARALLEL
from tilelang_musa.target import determine_target
from tilelang_musa.tileop.loop_plan import free_plan
from tilelang_musa.transform.layout_inference import decide_layouts

M, N, K = 64, 128, 4


def accumulate(fill_value):
    @T.prim_func
    def main(A: T.Tensor((K, M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            acc = T.alloc_fragment((M, N), "float32")
            if fill_value == 0.0:
                T.clear(acc)
            else:
                T.fill(acc, fill_value)
            for k in T.serial(K):
                for i, j in T.Parallel(M, N):
                    acc[i, j] += A[k, i, j]
            T.copy(acc, C)

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("fill_value", [0.0, 1.5])
def test_the_accumulating_loop_chooses_the_layout(arch, fill_value):
    kernel = tilelang.compile(accumulate(fill_value), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    # the accumulating loop's own partition: 16-byte pieces, one per thread per 512 elements
    assert "tl::vec_of(*reinterpret_cast<float4*>(A + (((k * 8192) + (it_1 * 512)) + (((int)threadIdx.x) * 4))))" \
        in source
    assert "acc[it] = " in source  # the fill still runs, on the slots that layout gives each thread
    a, c = rand((K, M, N), torch.float32, 4), poison((M, N), torch.float32)
    kernel(a, c)
    torch.testing.assert_close(c, a.sum(0) + fill_value)


MP31 = determine_target("musa -arch=mp_31")


@T.prim_func
def clear_then_load(A: T.Buffer((16, 32), "float32"), B: T.Buffer((16, 32), "float32")):
    T.func_attr({"target": MP31})
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        F = T.alloc_buffer((16, 32), "float32", scope="local.fragment")
        for i in T.serial(16, annotations={PARALLEL: 1}):  # T.clear(F), as LowerTileOp leaves it
            for j in T.serial(32, annotations={PARALLEL: 1}):
                F[i, j] = T.float32(0)
        for i in T.serial(16, annotations={PARALLEL: 1}):
            for j in T.serial(32, annotations={PARALLEL: 1}):
                F[i, j] = F[i, j] + A[i, j]
        for i in T.serial(16, annotations={PARALLEL: 1}):
            for j in T.serial(32, annotations={PARALLEL: 1}):
                B[i, j] = F[i, j]


def test_the_fragment_gets_the_layout_of_its_other_use():
    decisions = decide_layouts(clear_then_load, {})
    (fragment,) = decisions.layouts
    fill, load, store = decisions.nests  # program order
    assert decisions.layouts[fragment].is_equal(free_plan([16, 32], 32, 4).fragment)  # the load's 4-wide pieces
    assert load.reason == "free choice: the coalesced partition over 32 threads, 4-wide pieces"
    assert fill.reason.startswith("runs where `F` lives") and store.reason.startswith("runs where `F` lives")
