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


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_dp4a_whole_buffers(arch):
    """Upstream passes whole buffers too (their first element): upstream issue 2600's form."""

    @T.prim_func
    def main(A: T.Tensor((4,), "int8"), B: T.Tensor((4,), "int8"), C: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=1):
            T.dp4a(A, B, C)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    g = torch.Generator().manual_seed(5)
    a = torch.randint(-128, 128, (4,), generator=g, dtype=torch.int8)
    b = torch.randint(-128, 128, (4,), generator=g, dtype=torch.int8)
    c = torch.randint(-1000, 1000, (1,), generator=g, dtype=torch.int32)
    expected = c + (a.int() * b.int()).sum()
    kernel(a, b, c)
    torch.testing.assert_close(c, expected)


def test_dp4a_builds_outside_t_kernel():
    """As upstream's issue 2600 tests construct it: in a prim_func body, outside `with T.Kernel`."""

    @T.prim_func
    def main(A: T.Tensor((4,), "int8"), B: T.Tensor((4,), "int8"), C: T.Tensor((1,), "int32")):
        T.dp4a(A, B, C)

    assert "B[3]" in main.script()  # the four products are there


@pytest.mark.parametrize("a_dtype,b_dtype,c_dtype,message", [
    ("float16", "float16", "int32", "requires int8 inputs, got A.dtype='float16'"),
    ("int8", "int8", "float32", "requires an int32 accumulator, got C.dtype='float32'"),
    ("uint8", "uint8", "int32", "requires int8 inputs, got A.dtype='uint8'"),
    ("int8", "float16", "int32", "requires int8 inputs, got B.dtype='float16'"),
])
def test_dp4a_rejects_other_dtypes(a_dtype, b_dtype, c_dtype, message):
    with pytest.raises(ValueError, match=message):
        @T.prim_func
        def main(A: T.Tensor((4,), a_dtype), B: T.Tensor((4,), b_dtype), C: T.Tensor((1,), c_dtype)):
            T.dp4a(A, B, C)
