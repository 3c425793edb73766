"""T.dp4a: four int8 products accumulated into an int32, in the simulator against torch."""

import pytest
import torch

import tilelang
import tilelang.language as T


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_dp4a_dot_products(arch):
    K = 64

    @T.prim_func
    def main(A: T.Tensor((32, K), "int8"), B: T.Tensor((32, K), "int8"), C: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding(0)
            a = T.alloc_local((K,), "int8")
            b = T.alloc_local((K,), "int8")
            acc = T.alloc_local((1,), "int32")
            acc[0] = 0
            for k in T.serial(K):
                a[k] = A[tx, k]
                b[k] = B[tx, k]
            for k in T.serial(K // 4):
                T.dp4a(a[k * 4], b[k * 4], acc[0])
            C[tx] = acc[0]

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "(int)a[" in kernel.get_kernel_source()
    g = torch.Generator().manual_seed(3)
    a = torch.randint(-128, 128, (32, K), generator=g, dtype=torch.int8)
    b = torch.randint(-128, 128, (32, K), generator=g, dtype=torch.int8)
    c = torch.full((32,), -7, dtype=torch.int32)
    kernel(a, b, c)
    torch.testing.assert_close(c, (a.int() * b.int()).sum(1).int())
