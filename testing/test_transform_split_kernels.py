"""SplitKernels: a program with several `with T.Kernel(...)` scopes becomes one PrimFunc per scope, in launch order,
each with the program's parameters and attributes; one scope is the program itself; statements between or after
the scopes are an error naming the program."""

import pytest
import tvm

import tilelang.language as T
from conftest import without_locations
from tilelang_musa.errors import CompileError
from tilelang_musa.transform.split_kernels import split_kernels


def test_two_kernel_scopes_become_two_kernels_in_order():
    @T.prim_func
    def before(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            for i in T.serial(32):
                B[bx * 32 + i] = A[bx * 32 + i] * 2.0
        with T.Kernel(1, threads=64):
            for i in T.serial(64):
                A[i] = B[i] + 1.0

    @T.prim_func
    def first(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            for i in T.serial(32):
                B[bx * 32 + i] = A[bx * 32 + i] * 2.0

    @T.prim_func
    def second(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.serial(64):
                A[i] = B[i] + 1.0

    kernels = split_kernels(before)
    assert len(kernels) == 2
    for kernel, expected in zip(kernels, (first, second)):
        assert kernel.params[0].same_as(before.params[0]) and kernel.attrs.same_as(before.attrs)
        tvm.ir.assert_structural_equal(without_locations(kernel),
                                       without_locations(expected).with_attr("global_symbol", "before"))


def test_one_kernel_scope_is_the_program_itself():
    @T.prim_func
    def single(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.serial(32):
                A[i] = A[i] + 1.0

    (kernel,) = split_kernels(single)
    assert kernel.same_as(single)


def test_a_statement_between_kernel_scopes_is_an_error_naming_the_program():
    @T.prim_func
    def host_code(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.serial(32):
                A[i] = A[i] + 1.0
        A[0] = 0.0
        with T.Kernel(1, threads=32):
            for i in T.serial(32):
                A[i] = A[i] * 2.0

    with pytest.raises(CompileError, match=r"`host_code` has 2 T.Kernel scopes with statements between or after "
                                           "them"):
        split_kernels(host_code)
