"""Eager @tilelang.jit over packed fp4 tensors: a byte tensor (uint8, int8, torch.float4_e2m1fn_x2) passed for a
`T.Tensor((M, K), T.float4_e2m1fn)` parameter holds two values a byte, so `T.const` sizes bind to its logical shape
(K = 2 x the bytes of its last dim) and, for a `T.StridedTensor`, its logical strides (2 x the byte strides but the
last). An fp4 element only read (`T.evaluate(A[i, j])`, upstream's issue 2292) is a read, not arithmetic."""

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from tilelang_musa.transform.lower_fp4_storage import lower_fp4_storage

from test_dtypes_storage import fp4_decode

PACKED_TORCH_DTYPES = [torch.uint8, torch.int8] + (
    [torch.float4_e2m1fn_x2] if hasattr(torch, "float4_e2m1fn_x2") else [])


def _packed(rows: int, cols: int, seed: int, dtype: torch.dtype) -> torch.Tensor:
    codes = torch.randint(0, 256, (rows, cols // 2), generator=torch.Generator().manual_seed(seed), dtype=torch.uint8)
    return codes.view(dtype)


@tilelang.jit
def decode_fp4(A):
    M, K = T.const("M K")
    A: T.Tensor((M, K), T.float4_e2m1fn)
    B = T.empty((M, K), T.float16)
    with T.Kernel(M, threads=32) as bx:
        T.evaluate(A[bx, 0])  # a read for nothing: no fp4 arithmetic
        for j in T.Parallel(K):
            B[bx, j] = T.cast(A[bx, j], T.float16)
    return B


@tilelang.jit
def decode_strided_fp4(A):
    M, K, S = T.const("M K S")
    A: T.StridedTensor((M, K), (S, 1), T.float4_e2m1fn)
    B = T.empty((M, K), T.float16)
    with T.Kernel(M, threads=32) as bx:
        for j in T.Parallel(K):
            B[bx, j] = T.cast(A[bx, j], T.float16)
    return B


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("dtype", PACKED_TORCH_DTYPES, ids=str)
def test_sizes_bind_to_the_logical_shape_of_a_packed_fp4_tensor(arch, dtype, monkeypatch):
    monkeypatch.setenv("TILELANG_TARGET", f"musa -arch={arch}")
    a = _packed(6, 64, seed=int(PACKED_TORCH_DTYPES.index(dtype)), dtype=dtype)
    kernel = decode_fp4.compile(a)
    source = kernel.get_kernel_source()
    assert "unsigned char* __restrict__ A" in source  # bytes, two codes each
    assert "  tl::fp4_e2m1_to_float(A[(((int)blockIdx.x) * 64) >> 1], " in source  # the read for nothing
    torch.testing.assert_close(decode_fp4(a).float(), fp4_decode(a), rtol=0, atol=0)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_strides_bind_to_the_logical_strides_of_a_packed_fp4_tensor(arch, monkeypatch):
    monkeypatch.setenv("TILELANG_TARGET", f"musa -arch={arch}")
    whole = _packed(12, 128, seed=7, dtype=torch.int8)
    every_other_row = whole[::2, :]  # byte strides (128, 1): fp4 strides (256, 1)
    func = decode_strided_fp4.get_tir(every_other_row)
    buffer = next(iter(func.buffer_map.values()))
    assert [int(d) for d in buffer.shape] == [6, 128] and [int(s) for s in buffer.strides] == [256, 1]
    out = decode_strided_fp4(every_other_row)
    torch.testing.assert_close(out.float(), fp4_decode(every_other_row.contiguous()), rtol=0, atol=0)


def test_a_size_bound_by_a_stride_and_a_dim_that_disagree_is_an_error():
    @tilelang.jit
    def two(A, B):
        N, S = T.const("N S")
        A: T.StridedTensor((4, N), (S, 1), T.float32)
        B: T.Tensor((4, S), T.float32)
        with T.Kernel(1, threads=32):
            for j in T.Parallel(N):
                B[0, j] = A[0, j]

    with pytest.raises(tilelang.CompileError, match="size `S` is 16 from one tensor but 8 from dim 1 of `B`"):
        two.compile(torch.zeros(4, 16)[:, :8], torch.zeros(4, 8))


def test_an_fp4_element_only_read_lowers_to_a_decoded_read():
    @T.prim_func
    def before(A: T.Buffer((64,), "float4_e2m1fn")):
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            T.evaluate(A[tx])

    @T.prim_func
    def expected(A: T.Buffer((32,), "uint8")):
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            T.evaluate(T.call_extern("float32", "tl::fp4_e2m1_to_float", A[tx >> 1], tx & 1))

    tvm.ir.assert_structural_equal(lower_fp4_storage(before),
                                   expected.with_attr("global_symbol", before.attrs["global_symbol"]))


@tilelang.jit
def doubled(A):
    M, N = T.const("M N")
    A: T.Tensor((M, N), T.float32)
    B = T.empty(M, N, dtype=A.dtype)  # upstream's dims one by one
    with T.Kernel(M, threads=32) as bx:
        for j in T.Parallel(N):
            B[bx, j] = A[bx, j] * 2.0
    return B


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_t_empty_takes_its_dims_one_by_one(arch, monkeypatch):
    monkeypatch.setenv("TILELANG_TARGET", f"musa -arch={arch}")
    a = torch.randn(5, 48, generator=torch.Generator().manual_seed(3))
    assert doubled.compile(a).get_kernel_source().count("float* __restrict__") == 2  # A and the float32 output
    out = doubled(a)
    assert out.shape == (5, 48) and out.dtype == torch.float32
    torch.testing.assert_close(out, a * 2)
