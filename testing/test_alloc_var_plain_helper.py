"""A `T.alloc_var` handed to a plain Python function (a helper module's `align(x, 16)` = `(x + 15) // 16 * 16`, as
DeepSeek's TileKernels MoE mapping calls it) is its value, as upstream reads every use of the name; the helper
computes with it. Before, the helper got the variable's buffer and `x + 15` failed ("unsupported operand type(s)
for +: 'Var' and 'int'"). A @T.macro still gets the variable itself, so it can assign it."""

import pytest
import torch

import tilelang
import tilelang.language as T

ARCHS = ["mp_31", "mp_22"]


def ceil_div(x, y):  # not kernel code: a plain helper, as a package's utils.py has it
    return (x + y - 1) // y


def align(x, y):
    return ceil_div(x, y) * y


@T.macro
def add_one(v):
    v = v + 1


def aligned_counts(n):
    @T.prim_func
    def main(A: T.Tensor((n,), T.int32), Out: T.Tensor((n,), T.int32)):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            count = T.alloc_var(T.int32, init=0)
            count = A[tx]
            add_one(count)
            Out[tx] = align(count, 16) + align(x=count, y=4)

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_alloc_var_reads_as_its_value_in_a_plain_helper(arch):
    kernel = tilelang.compile(aligned_counts(64), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "count = count + 1;" in source, source  # the macro assigned the variable
    a = torch.randint(0, 1000, (64,), dtype=torch.int32, generator=torch.Generator().manual_seed(3))
    out = torch.full((64,), -1, dtype=torch.int32)
    kernel(a, out)
    c = a + 1
    torch.testing.assert_close(out, (c + 15) // 16 * 16 + (c + 3) // 4 * 4)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_dtype_called_on_an_alloc_var_casts_its_value(arch):
    """`T.float32(amax)` of a `T.alloc_var(T.bfloat16)` (DeepSeek TileKernels' swiglu per-channel cast) is a cast of
    the value; TVM's Cast refused the variable itself."""

    @T.prim_func
    def main(A: T.Tensor((64,), T.bfloat16), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            amax = T.alloc_var(T.bfloat16, init=0.0)
            amax = T.max(amax, A[tx])
            B[tx] = T.float32(amax) * 2.0

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    a = torch.randn((64,), generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
    b = torch.full((64,), float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, a.float().clamp_min(0) * 2, rtol=0, atol=0)
