"""`b = A[0, 0:4]` binds b to the slice's vector value (one load, as upstream's parser binds it): the MUSA C
declares `float4 b`, arithmetic and stores use it, and a tile op given b still sees the slice."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand


def moore_threads_let_program():  # Moore Threads' test_tilelang_language_let.py, unchanged
    @T.prim_func
    def main(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, (16, 16), dtype=T.float32, align=16)
        for _blockIdx in T.thread_binding(1, thread="blockIdx.x"):
            for _threadIdx in T.thread_binding(128, thread="threadIdx.x"):
                b = A[0, 0:4]
                A[0, 4:8] = b

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_let_of_a_slice_is_a_vector_variable(arch):
    kernel = tilelang.compile(moore_threads_let_program(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "const float4 b = *reinterpret_cast<float4*>(A);" in source
    assert "*reinterpret_cast<float4*>(A + 4) = b;" in source
    a = rand((16, 16), torch.float32)
    expected = a.clone()
    expected[0, 4:8] = a[0, 0:4]
    kernel(a)
    torch.testing.assert_close(a, expected, rtol=0, atol=0)


def arithmetic_program(dtype, lanes):
    @T.prim_func
    def main(A: T.Tensor((4, lanes), dtype), B: T.Tensor((4, lanes), dtype)):
        with T.Kernel(4, threads=32) as bx:
            b = A[bx, 0:lanes]
            B[bx, 0:lanes] = b * T.cast(2, dtype) + b

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("dtype, lanes, vector_type", [("float32", 4, "float4"), ("float16", 8, "tl::vec<half_t, 8>"),
                                                       ("int32", 2, "int2")])
def test_vector_let_in_arithmetic(arch, dtype, lanes, vector_type):
    kernel = tilelang.compile(arithmetic_program(dtype, lanes), target=f"musa -arch={arch}")
    assert f"const {vector_type} b = " in kernel.get_kernel_source()
    a = rand((4, lanes), getattr(torch, dtype))
    out = torch.full((4, lanes), -12345, dtype=torch.int32) if dtype == "int32" else poison((4, lanes), a.dtype)
    kernel(a, out)
    torch.testing.assert_close(out, a * 2 + a)


def tile_op_program():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((16,), "float32")
            a = A[8:24]
            T.copy(a, S)
            T.copy(S, B)

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_tile_op_given_a_bound_slice_copies_the_slice(arch):
    kernel = tilelang.compile(tile_op_program(), target=f"musa -arch={arch}")
    assert "a =" not in kernel.get_kernel_source()  # the vector value itself is unused, so it is not loaded
    a = rand((64,), torch.float32)
    out = poison((16,), torch.float32)
    kernel(a, out)
    torch.testing.assert_close(out, a[8:24], rtol=0, atol=0)


def atomic_program():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32):
            a = A[4:12]
            T.atomic_add(B[0:8], a)

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_atomic_add_of_a_bound_slice_adds_the_slice(arch):
    kernel = tilelang.compile(atomic_program(), target=f"musa -arch={arch}")
    a = rand((32,), torch.float32)
    b = rand((8,), torch.float32)
    expected = b + a[4:12]
    kernel(a, b)
    torch.testing.assert_close(b, expected)


def read_before_write_program():
    @T.prim_func
    def main(A: T.Tensor((4, 8), "float32")):
        with T.Kernel(4, threads=1) as bx:  # one thread: no other thread's store to race with
            b = A[bx, 0:4]  # read here, before the store below overwrites A[bx, 0:4]
            A[bx, 0:4] = A[bx, 4:8]
            A[bx, 4:8] = b

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_bound_slice_is_read_where_it_is_bound(arch):
    kernel = tilelang.compile(read_before_write_program(), target=f"musa -arch={arch}")
    a = rand((4, 8), torch.float32)
    expected = torch.cat([a[:, 4:8], a[:, 0:4]], dim=1)
    kernel(a)
    torch.testing.assert_close(a, expected, rtol=0, atol=0)
