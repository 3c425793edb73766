"""The eager @tilelang.jit style as upstream's eager-JIT notebook (examples/eager_jit) writes it: `f.compile(A, B,
...)` with tensors or T.Tensor specs setting the sizes, `T.dynamic("M, N, K")`, a kernel left to a @T.macro, and a
transposed tensor through `T.StridedTensor` with run-time strides."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand


@tilelang.jit
def gemm(A, B, block_M: int = 64, block_N: int = 64, block_K: int = 32):
    M, N, K = T.const("M, N, K")
    A: T.Tensor[[M, K], T.float16]
    B: T.Tensor[[K, N], T.float16]
    C = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(M, block_M), T.ceildiv(N, block_N), threads=128) as (bx, by):
        A_s = T.alloc_shared((block_M, block_K), A.dtype)
        B_s = T.alloc_shared((block_K, block_N), B.dtype)
        acc = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            T.copy(A[bx * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, by * block_N], B_s)
            T.gemm(A_s, B_s, acc)
        T.copy(acc, C[bx * block_M, by * block_N])
    return C


@T.macro
def copy_tiles(A, B, M, N):
    with T.Kernel(T.ceildiv(M, 32), T.ceildiv(N, 32), threads=128) as (bx, by):
        T.copy(A[bx * 32:(bx + 1) * 32, by * 32:(by + 1) * 32], B[bx * 32:(bx + 1) * 32, by * 32:(by + 1) * 32])


@tilelang.jit
def as_contiguous(A):
    M, N, dM, dN = T.dynamic("M, N, dM, dN")
    A: T.StridedTensor[[M, N], [dM, dN], T.float32]
    B = T.empty((M, N), A.dtype)  # the annotation's dtype, read before the kernel starts
    copy_tiles(A, B, M, N)  # the kernel is the macro's
    return B


def test_compile_takes_tensors_and_specs_positionally():
    a, b = rand((128, 64), torch.float16, 1), rand((64, 192), torch.float16, 2)
    kernel = gemm.compile(a, b, block_N=64)
    assert kernel is gemm.compile(T.Tensor((128, 64), T.float16), B=T.Tensor((64, 192), T.float16), block_N=64)
    assert kernel is gemm.compile(M=128, N=192, K=64)
    torch.testing.assert_close(kernel(a, b), a.float() @ b.float(), rtol=1e-2, atol=1e-2)
    with pytest.raises(TypeError, match="size `K` is 32 by name but 64"):
        gemm.compile(a, b, K=32)
    with pytest.raises(TypeError, match="`A` is a tensor parameter"):
        gemm.compile([1, 2], b)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_a_transposed_tensor_through_run_time_strides(arch, monkeypatch):
    monkeypatch.setenv("TILELANG_TARGET", f"musa -arch={arch}")
    a = rand((96, 64), torch.float32, 3)
    kernel = as_contiguous.compile(a.T)
    assert "* dM) + " in kernel.get_kernel_source() and "* dN)" in kernel.get_kernel_source()
    torch.testing.assert_close(as_contiguous(a.T), a.T.contiguous())  # strides (1, 96): the simulator's bounds
    torch.testing.assert_close(as_contiguous(a), a)                    # cover every offset either way


def test_dynamic_declares_several_sizes():
    @tilelang.jit
    def names(X):
        M, N = T.dynamic("M N")
        X: T.Tensor[[M, N], T.float32]
        Y = T.empty((M, N), T.float32)
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(M, N):
                Y[i, j] = X[i, j] * 2
        return Y

    x = rand((4, 8), torch.float32, 4)
    torch.testing.assert_close(names(x), x * 2)


@T.macro
def scale_rows(X, Y, M, N, factor):
    with T.Kernel(T.ceildiv(M, 32), threads=128) as bx:
        for i, j in T.Parallel(32, N):
            Y[bx * 32 + i, j] = X[bx * 32 + i, j] * factor


@tilelang.jit
def scale(X, M, N, factor):
    M: T.int32  # run-time arguments of the kernel, passed at each call: one kernel serves every size
    N: T.int32
    X: T.Tensor[[M, N], T.float32]
    Y = T.empty((M, N), T.float32)
    scale_rows(X, Y, M, N, factor)
    return Y


def test_sizes_annotated_as_scalars_are_run_time_arguments():
    x = rand((64, 16), torch.float32, 5)
    torch.testing.assert_close(scale(x, 64, 16, 3.0), x * 3)
    torch.testing.assert_close(scale(x[:40].contiguous(), 40, 16, 3.0), x[:40] * 3)
    assert scale.parse_cache_key(x, 64, 16, 3.0) == scale.parse_cache_key(x[:40], 40, 16, 3.0)
    assert len(scale._kernels) == 1
    source = scale.compile(x, 64, 16, 3.0).get_kernel_source()
    assert "int M, int N" in source


@tilelang.jit
def first_of(A: T.ptr, is_2d=False):
    if is_2d:
        M, N = T.const("M, N")
        A = T.match_buffer(A, [M, N], T.float32)  # the sizes come from the tensor passed for the pointer
        Out = T.empty((N,), T.float32)
        with T.Kernel(1, threads=32):
            for j in T.Parallel(N):
                Out[j] = A[0, j]
    else:
        L = T.const("L")
        A = T.match_buffer(A, [L], T.float32)
        Out = T.empty((1,), T.float32)
        with T.Kernel(1, threads=32):
            Out[0] = A[L - 1]
    return Out


def test_a_pointer_parameter_matched_to_a_tensor_takes_its_shape():
    a = rand((8, 12), torch.float32, 6)
    torch.testing.assert_close(first_of(a, is_2d=True), a[0])
    torch.testing.assert_close(first_of(a.reshape(-1)), a.reshape(-1)[-1:])


@T.macro
def collatz_steps(x, steps: T.Ref):
    if x != 1:  # unrolled at trace time: x is a Python int
        steps += 1
        collatz_steps(x // 2 if x % 2 == 0 else 3 * x + 1, steps)


@T.macro
def put(x: T.Ref, value):
    x = value


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_a_ref_parameter_stores_to_the_callers_element(arch):
    @T.prim_func
    def refs(A: T.Tensor((4,), T.int32), B: T.Tensor((2,), T.float32)):
        with T.Kernel(1, threads=1) as bx:
            put(A[1], 7)
            i = T.alloc_var(T.int32, 2)
            put(A[i], A[1] + 1)
            count = T.alloc_var(T.int32, 0)
            collatz_steps(6, count)  # 6 3 10 5 16 8 4 2 1: 8 steps
            A[3] = count
            B[0] = T.sin(bx) + T.cos(bx)  # an integer argument is taken as float32

    kernel = tilelang.compile(refs, target=f"musa -arch={arch}")
    a, b = torch.zeros(4, dtype=torch.int32), torch.full((2,), 5.0)
    kernel(a, b)
    assert a.tolist() == [0, 7, 8, 8]
    assert b[0].item() == pytest.approx(1.0)
    assert "sinf(" in kernel.get_kernel_source() or "__sinf(" in kernel.get_kernel_source()


@T.macro
def _scaled_copy(A, B):
    M, N = A.shape
    with T.Kernel(T.ceildiv(M, 32), threads=128) as bx:
        for i, j in T.Parallel(32, N):
            B[bx * 32 + i, j] = A[bx * 32 + i, j] * 2.0


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_tensor_annotated_parameters_make_a_macro_only_body_eager(arch):
    """`def f(A: T.Tensor[...], B: T.Tensor[...]): macro(A, B)` (Moore Threads' eager_jit `copy2`): the kernel is
    the macro's, the tensors are the signature's; it is the eager style, not a lazy function returning nothing."""
    @tilelang.jit(target=f"musa -arch={arch}")
    def scaled(A: T.Tensor[[64, 64], T.float32], B: T.Tensor[[64, 64], T.float32]):
        _scaled_copy(A, B)

    assert scaled.is_eager
    func = scaled.get_tir(T.Tensor((64, 64), T.float32), T.Tensor((64, 64), T.float32))
    assert [p.name for p in func.params] == ["A", "B"]
    a, b = rand((64, 64), torch.float32, 11), torch.full((64, 64), float("nan"))
    scaled(a, b)
    assert "2.000000e+00f" in scaled.compile(T.Tensor((64, 64), T.float32),
                                             T.Tensor((64, 64), T.float32)).get_kernel_source()
    torch.testing.assert_close(b, a * 2.0)
