"""Outputs shaped by scalar parameters (issue 38): `T.empty((3, n * 2))` with `n: T.int32`, and sizes that are
expressions of a scalar argument and a size the input tensors give (`m + n`). The scalar is the caller's argument;
the launcher sizes the outputs from it (upstream main's func_attrs `test_empty_dynamic_subbyte_output_packs_...`).
A scalar named like an input tensor's size still takes its value from the tensors."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand

ARCHS = ["mp_31", "mp_22"]


def ramp_and_scaled_copy():
    """B[i, :m] = A * (i + 1), B[i, m:] = 0 .. n - 1: an output of (n, m + n), n a scalar argument, m A's size."""
    @T.prim_func
    def kernel(A, n: T.int32):
        m = T.dynamic("m")
        A: T.Tensor[[m], T.float32]
        B = T.empty((n, m + n), T.float32)
        with T.Kernel(n, threads=32) as bx:
            for j in T.Parallel(m + n):
                B[bx, j] = T.if_then_else(j < m, A[j] * T.cast(bx + 1, T.float32), T.cast(j - m, T.float32))
        return B

    return kernel


def ramp_and_scaled_copy_reference(a, n):
    scaled = a[None, :] * torch.arange(1, n + 1, dtype=torch.float32)[:, None]
    return torch.cat([scaled, torch.arange(n, dtype=torch.float32).expand(n, n)], 1)


@pytest.mark.parametrize("arch", ARCHS)
def test_output_sized_by_a_scalar_and_an_input_size(arch):
    compiled = tilelang.compile(ramp_and_scaled_copy(), target=f"musa -arch={arch}")
    source = compiled.get_kernel_source()
    assert "int n" in source and "int m" in source  # both sizes reach the kernel as its parameters
    assert [p.name for p in compiled.params if not p.is_output] == ["A", "n", "m"]
    assert compiled.metadata.host.size_params == ("m",)  # m from A's shape; n the caller's
    a = rand((37,), torch.float32, 11)
    for n in (5, 2):  # one compile, sizes at each call
        b = compiled(a, n)
        assert b.shape == (n, 37 + n)
        torch.testing.assert_close(b, ramp_and_scaled_copy_reference(a, n))


@pytest.mark.parametrize("arch", ARCHS)
def test_output_sized_by_a_scalar_alone(arch):
    """Upstream main's `kernel(m: T.int32)` with `T.empty([m + 1])`, and `(3, n * 2)` as a 2-D output."""
    @T.prim_func
    def kernel(X: T.Tensor((3,), T.float32), n: T.int32):
        B = T.empty((3, n * 2), T.float32)
        with T.Kernel(1, threads=1):
            for i, j in T.grid(3, n * 2):
                B[i, j] = X[i] * T.cast(j, T.float32)
        return B

    compiled = tilelang.compile(kernel, target=f"musa -arch={arch}")
    assert "int n" in compiled.get_kernel_source()
    x = rand((3,), torch.float32, 12)
    out = compiled(x, 11)
    assert out.shape == (3, 22)
    torch.testing.assert_close(out, x[:, None] * torch.arange(22, dtype=torch.float32)[None, :])


def test_packed_output_sized_by_a_scalar():
    """Upstream main's float4_e2m1fn case: `T.empty((3, n * 2), T.float4_e2m1fn)`, n = 11: 3 x 22 fp4 values,
    which are 3 x 11 bytes."""
    @T.prim_func
    def kernel(n: T.int32):
        output = T.empty((3, n * 2), T.float4_e2m1fn)
        with T.Kernel(1, threads=1):
            T.evaluate(0)
        return output

    compiled = tilelang.compile(kernel, target="musa -arch=mp_31")
    out = compiled(11)
    assert out.dtype == getattr(torch, "float4_e2m1fn_x2", torch.uint8) and out.shape == (3, 11)  # upstream main's


def test_a_negative_or_non_integer_size_is_a_named_error():
    compiled = tilelang.compile(ramp_and_scaled_copy(), target="musa -arch=mp_31")
    a = rand((4,), torch.float32, 13)
    with pytest.raises(ValueError, match=r"B: Tensor\[\(n, m \+ n\), float32\] \(output\) would have dim 0 = `n` = -6 "
                                         r"\(n = -6\); sizes cannot be negative"):
        compiled(a, -6)

    @T.prim_func
    def tail(A, n: T.int32):
        m = T.dynamic("m")
        A: T.Tensor[[m], T.float32]
        B = T.empty((m - n,), T.float32)
        with T.Kernel(1, threads=1):
            for j in T.serial(m - n):
                B[j] = A[j + n]
        return B

    tail_compiled = tilelang.compile(tail, target="musa -arch=mp_31")
    torch.testing.assert_close(tail_compiled(a, 1), a[1:])
    with pytest.raises(ValueError, match=r"would have dim 0 = `m - n` = -2 \(m = 4, n = 6\)"):
        tail_compiled(a, 6)
    with pytest.raises(TypeError, match=r"scalar n \(int32\) expects an int; got float 2.5"):
        compiled(a, 2.5)


def test_a_scalar_named_like_an_input_size_still_comes_from_the_tensors():
    """A size (T.dynamic) that an input tensor's dims give is bound from them, not passed; one that only an
    output names is a trailing argument, as a size only the body reads already was."""
    @T.prim_func
    def kernel(A, B):
        m = T.dynamic("m")
        k = T.dynamic("k")
        A: T.Tensor[[m], T.float32]
        B: T.Tensor[[k], T.float32]
        with T.Kernel(1, threads=1):
            for j in T.serial(k):
                B[j] = A[j % m]

    compiled = tilelang.compile(kernel, out_idx=[1], target="musa -arch=mp_31")
    assert compiled.metadata.host.size_params == ("m",)
    a = rand((4,), torch.float32, 14)
    torch.testing.assert_close(compiled(a, 6), a.repeat(2)[:6])
