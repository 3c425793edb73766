"""T.alloc_buffer: TVMScript's allocation with the scope by name.

Its default scope, "global", written before the kernels, is a scratch tensor of the call (T.alloc_global: the launcher
allocates it and passes it to every kernel of the function); "shared"/"shared.dyn", "local.fragment", "local" and
"local.var" inside a kernel are the matching T.alloc_*. A global buffer inside a kernel, an unknown scope or a
layout option are errors at their line.
"""


import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import line_of, poison, rand
from tilelang.errors import CompileError

ARCHES = ["musa -arch=mp_31", "musa -arch=mp_22"]


def _split_sum(M, N, split, bm):
    """Kernel 1 writes `split` partial scaled copies of X into a global scratch; kernel 2 sums them."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        Partial = T.alloc_buffer((split, M, N), T.float32)
        with T.Kernel(T.ceildiv(M, bm), split, threads=128) as (bx, bz):
            tile = T.alloc_buffer((bm, N), T.float32, scope="shared")
            acc = T.alloc_buffer((bm, N), T.float32, scope="local.fragment")
            T.copy(X[bx * bm, 0], tile)
            for i, j in T.Parallel(bm, N):
                acc[i, j] = tile[i, j] * (bz + 1)
            T.copy(acc, Partial[bz, bx * bm:(bx + 1) * bm, :])
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            total = T.alloc_fragment((bm, N), T.float32)
            T.clear(total)
            for k in range(split):
                for i, j in T.Parallel(bm, N):
                    total[i, j] += Partial[k, bx * bm + i, j]
            T.copy(total, Y[bx * bm, 0])

    return main


@pytest.mark.parametrize("target", ARCHES)
def test_global_scratch_between_two_kernels_matches_torch(target):
    M, N, split, bm = 48, 32, 3, 16
    kernel = tilelang.compile(_split_sum(M, N, split, bm), target=target)
    source = kernel.get_kernel_source()
    # Both kernels take the scratch as a global pointer; the tile and fragment are shared memory and registers.
    assert source.count("float* __restrict__ Partial") == 2
    assert "__shared__ __align__(16) float tile[512];" in source and "float acc[4];" in source
    x = rand((M, N), torch.float32, seed=3)
    y = poison((M, N), torch.float32)
    kernel(x, y)
    torch.testing.assert_close(y, x * sum(range(1, split + 1)))


def test_global_buffer_inside_a_kernel_is_an_error_at_its_line():
    def build():
        @T.prim_func
        def main(A: T.Tensor((16,), T.float32)):
            with T.Kernel(1, threads=16) as _:
                scratch = T.alloc_buffer((16,), T.float32)  # the line
                T.copy(A, scratch)

        return main

    with pytest.raises(CompileError, match=r"T.alloc_buffer\(..., scope=\"global\"\) inside `with T.Kernel") as info:
        tilelang.compile(build(), target=ARCHES[0])
    assert info.value.loc.lineno == line_of(build, "# the line")


@pytest.mark.parametrize("extra, message", [
    ({"scope": "texture"}, r"scope 'texture' is not one of"),
    ({"scope": "shared", "strides": [1, 16]}, r"`strides=\[1, 16\]` is not supported"),
])
def test_unsupported_scope_or_option_is_an_error_naming_it(extra, message):
    def build():
        @T.prim_func
        def main(A: T.Tensor((16, 16), T.float32)):
            with T.Kernel(1, threads=16) as _:
                tile = T.alloc_buffer((16, 16), T.float32, **extra)
                T.copy(A, tile)

        return main

    with pytest.raises(CompileError, match=message):
        tilelang.compile(build(), target=ARCHES[0])
