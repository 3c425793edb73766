"""LegalizeNegativeIndex: an index negative for every value it takes counts from the end of its dimension (upstream's
`A[-1]`, `A[-i - 1]`); an index of unknown sign is left alone. Before/expected IR, and a kernel in the simulator."""

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang.transform import LegalizeNegativeIndex


@T.prim_func
def constant_before(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    B[0] = A[T.int32(-1)]


@T.prim_func
def constant_expected(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    B[0] = A[T.int32(15)]


@T.prim_func
def affine_before(A: T.Buffer((16,), "float32"), B: T.Buffer((4,), "float32")):
    for i in T.serial(4):
        B[i] = A[-i - 1]


@T.prim_func
def affine_expected(A: T.Buffer((16,), "float32"), B: T.Buffer((4,), "float32")):
    for i in T.serial(4):
        B[i] = A[15 - i]


@T.prim_func
def unknown_sign(shift: T.int32, A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in T.serial(16):
        B[i] = A[shift + i]


@pytest.mark.parametrize("before,expected", [(constant_before, constant_expected), (affine_before, affine_expected),
                                             (unknown_sign, unknown_sign)])
def test_negative_indices_count_from_the_end(before, expected):
    after = LegalizeNegativeIndex()(tvm.IRModule({"main": before}))["main"]
    tvm.ir.assert_structural_equal(after.body, expected.body, map_free_vars=True)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_a_kernel_reading_from_the_end(arch):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((65,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            B[tx] = A[-tx - 1]
            if tx == 0:
                B[-1] = A[-1] * 2.0

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "A[63 - ((int)threadIdx.x)]" in source and "B[64] = A[63]" in source
    a, b = rand((64,), torch.float32, 91), poison((65,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b[:64], a.flip(0))
    torch.testing.assert_close(b[64], a[63] * 2.0)
