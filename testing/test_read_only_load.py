"""`T.__ldg(x[i])` / `T.__ldg(x, i)`: one element of a global tensor read through the read-only data path,
printed as `__ldg(&x[i])`."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

N = 128


def mirrored_sum():
    @T.prim_func
    def f(x: T.Tensor((N,), T.float32), y: T.Tensor((N,), T.float32)):
        with T.Kernel(N // 32, threads=32) as bx:
            tx = T.get_thread_binding()
            y[bx * 32 + tx] = T.__ldg(x[bx * 32 + tx]) + T.__ldg(x, N - 1 - bx * 32 - tx)

    return f


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_ldg_prints_the_intrinsic_on_an_address_and_reads_the_element(arch):
    kernel = tilelang.compile(mirrored_sum(), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert src.count("__ldg(&x[") == 2, src
    x, y = rand((N,), torch.float32, 1), poison((N,), torch.float32)
    kernel(x, y)
    torch.testing.assert_close(y, x + x.flip(0))


def test_ldg_of_a_shared_tile_is_an_error_naming_the_line():
    with pytest.raises(tilelang.CompileError, match=r"(?s)y\[0\] = T.__ldg\(s\[0\]\).*one element of a global tensor"):
        @T.prim_func
        def f(x: T.Tensor((N,), T.float32), y: T.Tensor((N,), T.float32)):
            with T.Kernel(1, threads=N) as bx:
                s = T.alloc_shared([N], T.float32)
                T.copy(x, s)
                y[0] = T.__ldg(s[0])
