"""T.view / T.reshape check that the view covers the viewed storage exactly: a mismatch is a CompileError naming
the line that is also an AssertionError (upstream asserts it); symbolic sizes must be provably equal; outside a
kernel a tensor annotation or declared buffer is checked and viewed the same way."""

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.errors import CompileError


def view_program(N, shape, dtype, new_dtype=None):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor(shape, new_dtype or dtype)):
        with T.Kernel(1, threads=128):
            T.copy(T.view(A, shape, dtype=new_dtype), B)

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_view_runs(arch):
    kernel = tilelang.compile(view_program(1024, [32, 32], "float32"), target=f"musa -arch={arch}")
    a, b = rand((1024,), torch.float32), poison((32, 32), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.view(32, 32))


def test_view_size_mismatch_is_an_assertion_and_a_compile_error():
    with pytest.raises(AssertionError) as info:
        view_program(1024, [32, 33], "float32")
    assert isinstance(info.value, CompileError) and "test_view_sizes.py" in str(info.value)


def test_view_outside_kernel_symbolic_sizes():
    batch, seq = T.dynamic("batch"), T.dynamic("seq")
    src = T.Tensor([batch + 1, seq, 128], "float")
    viewed = T.view(src, [batch + 1, seq * 128])
    assert len(viewed.shape) == 2 and viewed.dtype == "float32"
    with pytest.raises(AssertionError):
        T.view(src, [batch + 1, seq * 129])


def test_view_outside_kernel_declared_buffer_dtype():
    A = tvm.tirx.decl_buffer((16, 32), "float4_e2m1fn", name="A")
    viewed = T.view(A, (16, 16), dtype=T.uint8)
    assert str(viewed.dtype) == "uint8" and tuple(int(d) for d in viewed.shape) == (16, 16)
    with pytest.raises(AssertionError):
        T.view(A, (16, 17), dtype=T.uint8)
