"""CheckNestedLoops: upstream's semantic checks of what a T.Parallel body may hold (perfect nests only, no
T.Pipelined, no block-wide tile op), each rejected at the inner construct's line; a valid program passes unchanged."""

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from tilelang_musa.transform.check_nested_loops import check_nested_loops

from conftest import poison, rand


def nested_parallel(extra_statement: bool):
    @T.prim_func
    def main(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256):
            for i in T.Parallel(16):
                if extra_statement:
                    B[i] = 0.0
                for j in T.Parallel(16):
                    B[i * 16 + j] = A[i * 16 + j] + 1.0

    return main


@pytest.mark.parametrize("arch", ["mp_22", "mp_31"])
def test_a_perfect_parallel_nest_runs_as_one_loop(arch):
    kernel = tilelang.compile(nested_parallel(False), target=f"musa -arch={arch}")
    assert "threadIdx.x" in kernel.get_kernel_source()
    a, b = rand((256,), torch.float32, 1), poison((256,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a + 1.0)


def test_the_check_leaves_a_valid_program_unchanged():
    func = nested_parallel(False)
    tvm.ir.assert_structural_equal(check_nested_loops(func), func)


def test_a_parallel_loop_beside_other_statements_is_rejected_at_its_line():
    with pytest.raises(tilelang.CompileError, match=r"test_check_nested_loops.py:\d+:\d+ \(in tl.CheckNestedLoops\):\n"
                                                    r"    for j in T.Parallel\(16\):\n(.*\n)*.*\[TileLang Semantic "
                                                    r"Check\] the T.Parallel loop `j` is nested in the T.Parallel loop "
                                                    r"`i` beside other statements"):
        tilelang.compile(nested_parallel(True), target="musa -arch=mp_31")


def test_a_pipelined_loop_inside_a_parallel_loop_is_rejected():
    @T.prim_func
    def main(A: T.Tensor((16, 64), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=16):
            for i in T.Parallel(16):
                for k in T.Pipelined(4, num_stages=2):
                    B[i] = B[i] + A[i, k]

    with pytest.raises(tilelang.CompileError, match=r"    for k in T.Pipelined\(4, num_stages=2\):\n(.*\n)*.*a "
                                                    r"T.Pipelined loop \(`k`\) inside the T.Parallel loop `i`"):
        tilelang.compile(main, target="musa -arch=mp_31")


def test_a_gemm_inside_a_parallel_loop_is_rejected():
    @T.prim_func
    def main(A: T.Tensor((32, 32), "float16"), B: T.Tensor((32, 32), "float16"), C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((32, 32), "float16")
            b = T.alloc_shared((32, 32), "float16")
            c = T.alloc_fragment((32, 32), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.clear(c)
            for _ in T.Parallel(1):
                T.gemm(a, b, c)
            T.copy(c, C)

    with pytest.raises(tilelang.CompileError, match=r"    T.gemm\(a, b, c\)\n(.*\n)*.*T.gemm inside the T.Parallel "
                                                    r"loop `_`: a tile op runs on the whole block"):
        tilelang.compile(main, target="musa -arch=mp_31")
