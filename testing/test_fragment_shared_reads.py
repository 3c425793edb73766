"""Layout inference for fragments a T.Parallel nest does not visit one element per iteration:

- read by several iterations (`s[i, j // 8]`, a per-group scale read by every element of its group): the element
  lives with every thread that runs one of its iterations (upstream's CompleteBufferFragment), so the loop that
  fills the fragment computes each element on each of those threads;
- reached only in part (`T.copy(src, f[0:4])` of a 64-element fragment) before a loop that walks it whole: the
  whole walk places it and the partial copy follows that placement."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

ROWS, GROUPS, GROUP = 8, 4, 8
THREADS = 128


def group_scale_program(index):
    """x[i, j] * s[i, index(j)], s filled from S in its own loop before the (ROWS, GROUPS * GROUP) product."""
    cols = GROUPS * GROUP

    @T.prim_func
    def main(X: T.Tensor((ROWS, cols), "float32"), S: T.Tensor((ROWS, GROUPS), "float32"),
             Y: T.Tensor((ROWS, cols), "float32")):
        with T.Kernel(1, threads=THREADS):
            x = T.alloc_fragment((ROWS, cols), "float32")
            s = T.alloc_fragment((ROWS, GROUPS), "float32")
            T.copy(X, x)
            for i, g in T.Parallel(ROWS, GROUPS):
                s[i, g] = S[i, g] * 2.0
            for i, j in T.Parallel(ROWS, cols):
                Y[i, j] = x[i, j] * s[i, index(j)]

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("index", [lambda j: j // GROUP, lambda j: j * 16 // (GROUP * 16)],
                         ids=["j_div_8", "j_times_16_div_128"])
def test_fragment_read_by_several_iterations(arch, index):
    kernel = tilelang.compile(group_scale_program(index), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    # no exchange through shared memory: each thread computes the scales it reads into its own registers
    assert "__shared__" not in source and "float s[" in source, source
    x, scale = rand((ROWS, GROUPS * GROUP), torch.float32, 5), rand((ROWS, GROUPS), torch.float32, 6)
    y = poison((ROWS, GROUPS * GROUP), torch.float32)
    kernel(x, scale, y)
    torch.testing.assert_close(y, x * (scale * 2.0).repeat_interleave(GROUP, dim=1))


def partial_copy_program(n, part):
    @T.prim_func
    def main(A: T.Tensor((part,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=64):
            f = T.alloc_fragment((n,), "float32")
            T.copy(A[0:part], f[0:part])
            for i in T.Parallel(n):
                if i < part:
                    B[i] = f[i] + 1.0
                else:
                    B[i] = 0.0

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("part", [4, 1])
def test_fragment_copied_in_part_before_a_whole_walk(arch, part):
    n = 64
    kernel = tilelang.compile(partial_copy_program(n, part), target=f"musa -arch={arch}")
    a, b = rand((part,), torch.float32, 7), poison((n,), torch.float32)
    kernel(a, b)
    expected = torch.zeros(n)
    expected[:part] = a + 1.0
    torch.testing.assert_close(b, expected)
