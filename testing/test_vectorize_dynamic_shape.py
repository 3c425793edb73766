"""A tensor with a `T.dynamic` dimension is vectorized as the static one is where its size is a provable multiple of
the vector (upstream's planner): `T.copy(x[p, 0, 0], frag)` of a (n, 4, 4) float32 tensor fills a fragment of 4
threads x 4 slots, as with a static n. The fragment's layout decides a reduction's order, so DeepSeek's TileKernels
(mHC pre_big_fuse against the unfused sinkhorn, compared bit for bit) need both shapes to agree. A dynamic size
that is not a provable multiple (a (n,) vector) stays scalar."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

ARCHS = ["mp_31", "mp_22"]


def row_normalize(dynamic: bool):
    """out[t] = x[t] / (row sums of x[t]): (4, 4) per token, loaded by T.copy into a fragment."""
    n = T.dynamic("n") if dynamic else 6

    @T.prim_func
    def main(X: T.Tensor((n, 4, 4), "float32"), Y: T.Tensor((n, 4, 4), "float32")):
        with T.Kernel(n) as p:
            f = T.alloc_fragment((1, 4, 4), "float32")
            s = T.alloc_fragment((1, 4), "float32")
            T.copy(X[p, 0, 0], f)
            T.reduce_sum(f, s, dim=2)
            for i, j, k in T.Parallel(1, 4, 4):
                f[i, j, k] = f[i, j, k] / s[i, j]
            T.copy(f, Y[p, 0, 0])

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_dynamic_leading_dimension_vectorizes_as_a_static_one(arch):
    for dynamic in (False, True):
        kernel = tilelang.compile(row_normalize(dynamic), target=f"musa -arch={arch}")
        source = kernel.get_kernel_source()
        assert "float f[4];" in source  # 4 slots a thread, one row (not 16 threads of one element)
        assert "*reinterpret_cast<float4*>(f) = " in source
        x, y = rand((6, 4, 4), torch.float32, 31), poison((6, 4, 4), torch.float32)
        kernel(x, y)
        torch.testing.assert_close(y, x / x.sum(-1, keepdim=True))
    # the same layout, so the same reduction order: bit for bit the same result
    static = tilelang.compile(row_normalize(False), target=f"musa -arch={arch}")
    dynamic = tilelang.compile(row_normalize(True), target=f"musa -arch={arch}")
    x = rand((6, 4, 4), torch.float32, 32)
    a, b = poison((6, 4, 4), torch.float32), poison((6, 4, 4), torch.float32)
    static(x, a)
    dynamic(x, b)
    assert torch.equal(a, b)


def tail_copy():
    """A (n,) vector read 8 at a time: n need not be a multiple of 4, so the loads stay scalar."""
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 8), threads=32) as p:
            f = T.alloc_fragment((8,), "float32")
            T.copy(X[p * 8], f)
            for i in T.Parallel(8):
                f[i] = f[i] * 2
            T.copy(f, Y[p * 8])

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_dynamic_size_not_a_multiple_stays_scalar(arch):
    kernel = tilelang.compile(tail_copy(), target=f"musa -arch={arch}")
    assert "float4" not in kernel.get_kernel_source()
    x, y = rand((13,), torch.float32, 33), poison((13,), torch.float32)
    kernel(x, y)
    torch.testing.assert_close(y, x * 2)
