"""A fragment indexed in T.Parallel by a loop variable and by a value the nest holds fixed (`x[k, i]` inside a
serial loop over k, as a split-KV combine reads its per-split log-sum-exps): the thread that runs iteration i holds
every `x[*, i]`, the fixed dimension in its own slots."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

S, M = 4, 64


def combine():
    @T.prim_func
    def f(X: T.Tensor((S, M), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment([S, M], "float32")
            mx = T.alloc_fragment([M], "float32")
            acc = T.alloc_fragment([M], "float32")
            row = T.alloc_fragment([M], "float32")
            T.copy(X, x)
            T.reduce_max(x, mx, dim=0, clear=True)
            T.clear(acc)
            for k in T.Pipelined(S):
                T.copy(x[k, :], row)
                for i in T.Parallel(M):
                    acc[i] += T.exp2(row[i] - mx[i]) + x[k, i]
            T.copy(acc, Y)

    return f


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_fixed_index_keeps_the_dimension_in_the_slots(arch):
    kernel = tilelang.compile(combine(), out_idx=[-1], target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    # the fixed index reaches a slot of the thread's own copy (`x[k]`, or `x_relaid[(it * 4) + k]` where x is
    # laid out otherwise for the copy that fills it)
    assert re.search(r"x\w*\[(\(it_\d+ \* 4\) \+ )?k(_\d+)?\]", src), src
    x = rand((S, M), torch.float32, 1)
    ref = (torch.exp2(x - x.max(0).values) + x).sum(0)
    torch.testing.assert_close(kernel(x), ref, rtol=1e-4, atol=1e-4)


def test_a_fixed_index_mixed_with_a_loop_variable_is_still_an_error():
    @T.prim_func
    def f(X: T.Tensor((S, M), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment([S, M], "float32")
            acc = T.alloc_fragment([M], "float32")
            T.copy(X, x)
            for k in T.serial(S):
                for i in T.Parallel(M):
                    acc[i] = x[k, (i + k) % M]
            T.copy(acc, Y)

    with pytest.raises(tilelang.CompileError, match="x"):
        tilelang.compile(f, out_idx=[-1], target="musa -arch=mp_31")
