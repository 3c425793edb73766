"""A fragment written in a T.Parallel nest by several iterations at once (its index leaves out a loop variable): its
layout replicates it over the threads of those iterations, and each copy is written by its own thread's iterations.
Where the value, or a condition around the store, depends on the left-out variable, the copies would differ (a
silent wrong result): that is a CompileError. Where it does not, every copy gets the same value: allowed."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

M, N = 16, 64


def pick(conditional: bool):
    @T.prim_func
    def f(X: T.Tensor((M, N), "float32"), C: T.Tensor((M,), "int32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((M, N), "float32")
            col = T.alloc_fragment((M,), "int32")
            out = T.alloc_fragment((M,), "float32")
            T.copy(X, x)
            T.copy(C, col)
            for i, j in T.Parallel(M, N):
                if conditional:
                    if j == col[i]:
                        out[i] = x[i, j]  # only the thread running (i, col[i]) writes its copy
                else:
                    out[i] = T.cast(col[i], "float32") * 2.0  # the same value from every j
            T.copy(out, Y)

    return f


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_a_value_that_depends_on_the_left_out_variable_is_refused(arch):
    with pytest.raises(tilelang.CompileError, match=r"(?s)fragment `out` is written as `out\[i\]` by every value of "
                                                    r"`j`.*Reduce along `j`"):
        tilelang.compile(pick(conditional=True), target=f"musa -arch={arch}")


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_the_same_value_from_every_iteration_is_allowed(arch):
    kernel = tilelang.compile(pick(conditional=False), target=f"musa -arch={arch}")
    x, c, y = rand((M, N), torch.float32, 1), torch.randint(0, N, (M,), dtype=torch.int32), poison((M,), torch.float32)
    kernel(x, c, y)
    torch.testing.assert_close(y, c.float() * 2.0)
