"""`T.gemm(..., clear_accum=<run-time condition>)`, as upstream writes the K loop: `clear_accum=(k == 0)`
overwrites C on the steps where the condition holds and accumulates on the others. Python's bool() of the
comparison is False, so the gemm used to accumulate into whatever C held (NaN from the launcher's poison)."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand

ARCHS = ["mp_22", "mp_31"]
M = N = 32
BK = 32


def k_loop(steps, cleared_at, pipelined):
    """C = A @ B over `steps` K-steps, the gemm told to clear C at step `cleared_at`; nothing else writes C."""
    loop = (lambda n: T.Pipelined(n, num_stages=1)) if pipelined else T.serial

    @T.prim_func
    def main(A: T.Tensor((M, steps * BK), "float16"), B: T.Tensor((steps * BK, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((M, BK), "float16")
            b_s = T.alloc_shared((BK, N), "float16")
            c_f = T.alloc_fragment((M, N), "float32")
            for k in loop(steps):
                T.copy(A[0, k * BK], a_s)
                T.copy(B[k * BK, 0], b_s)
                T.gemm(a_s, b_s, c_f, clear_accum=(k == cleared_at))
            T.copy(c_f, C)

    return main


def run(kernel, steps):
    a, b = rand((M, steps * BK), torch.float16, 1), rand((steps * BK, N), torch.float16, 2)
    c = torch.full((M, N), float("nan"))
    kernel(a, b, c)
    return a.float(), b.float(), c


@pytest.mark.parametrize("arch", ARCHS)
def test_first_step_clears_in_a_pipelined_loop(arch):
    kernel = tilelang.compile(k_loop(2, 0, pipelined=True), target=f"musa -arch={arch}")
    # the clear, under the condition (mp_31's consumer loop) or where pipelining resolved it (mp_22's prologue)
    assert re.search(r"c_f\[\w+\] = 0\.000000e\+00f;", kernel.get_kernel_source())
    a, b, c = run(kernel, 2)
    torch.testing.assert_close(c, a @ b, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("arch", ARCHS)
def test_steps_before_the_clearing_one_are_dropped(arch):
    """Clearing at step 1 of 3 keeps steps 1 and 2 only: the condition is read at each step."""
    kernel = tilelang.compile(k_loop(3, 1, pipelined=False), target=f"musa -arch={arch}")
    a, b, c = run(kernel, 3)
    torch.testing.assert_close(c, a[:, BK:] @ b[BK:], rtol=1e-3, atol=1e-3)


def test_a_constant_condition_is_the_flag():
    """A condition known when the kernel is traced (a Python bool, or an IR constant) adds no branch."""
    def program(clear):
        @T.prim_func
        def main(A: T.Tensor((M, BK), "float16"), B: T.Tensor((BK, N), "float16"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(1, threads=128):
                a_s = T.alloc_shared((M, BK), "float16")
                b_s = T.alloc_shared((BK, N), "float16")
                c_f = T.alloc_fragment((M, N), "float32")
                T.copy(A, a_s)
                T.copy(B, b_s)
                T.gemm(a_s, b_s, c_f, clear_accum=clear)
                T.copy(c_f, C)
        return main

    sources = [tilelang.lower(program(clear), target="musa -arch=mp_22").kernel_source
               for clear in (True, T.bool(True))]
    assert sources[0] == sources[1]
    assert "if (" not in sources[0].split("__global__")[1]
