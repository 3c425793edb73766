"""Asynchronous (LDLMS) copies of float4_e2m1fn tiles, as an FP8 x FP4 GEMM's pipelined weight loads make them
(DeepSeek-V4's fp4_gemm): a 16-byte piece is 32 fp4 elements, not 16 (the piece was sized by whole bytes an element,
so each thread copied 16 bytes at an 8-byte stride: misaligned, and overlapping); and a guarded copy's clamped
address, `Select(row_ok, row, 0) * K + Select(row_ok, 32, 0)` under a swizzled grid, is an even element, halved term
by term into its byte (it was refused as not provably even)."""

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from tilelang_musa.transform.lower_fp4_storage import lower_fp4_storage

ARCHS = ["mp_31", "mp_22"]
E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def decoded_weights(n, k, seed):
    """(packed bytes as torch's float4_e2m1fn_x2, their float values): element 2j in byte j's low nibble."""
    codes = torch.randint(0, 16, (n, k), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).view(torch.float4_e2m1fn_x2)
    return packed, E2M1[(codes & 7).long()] * torch.where(codes >= 8, -1.0, 1.0)


def pipelined_fp4_rows(n, k, block_n, block_k, swizzle):
    @T.prim_func
    def main(B: T.Tensor((n, k), "float4_e2m1fn"), Out: T.Tensor((n, k), T.float32)):
        with T.Kernel(T.ceildiv(n, block_n), 2, threads=128) as (bx, by):
            if swizzle:
                T.use_swizzle(panel_size=10)
            S = T.alloc_shared((block_n, block_k), "float4_e2m1fn")
            for kk in T.Pipelined(k // block_k, num_stages=2):
                T.copy(B[bx * block_n, kk * block_k], S)
                for i, j in T.Parallel(block_n, block_k):
                    if by == 0:
                        Out[bx * block_n + i, kk * block_k + j] = T.Cast(T.float32, S[i, j])

    return main


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("swizzle", [False, True])
def test_pipelined_fp4_tile_copies_take_32_elements_a_piece(arch, swizzle):
    n, k = 200, 256  # 200 rows: the last block's rows past the tensor are guarded
    kernel = tilelang.compile(pipelined_fp4_rows(n, k, 128, 32, swizzle), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl::cp_async_gs_conditional<16>(&buf_dyn_shmem[" in source, source
    assert "((int)threadIdx.x) * 16)" in source, source  # one 32-element (16-byte) row a thread
    packed, want = decoded_weights(n, k, 3)
    out = torch.full((n, k), float("nan"))
    kernel(packed, out)
    torch.testing.assert_close(out, want, rtol=0, atol=0)


@T.prim_func
def guarded_address_before(B: T.Buffer((512,), "float4_e2m1fn"), row: T.int32):
    S = T.alloc_buffer((32,), "float4_e2m1fn", scope="shared")
    T.evaluate(T.call_extern("int32", "tl::cp_async_gs<16>", T.address_of(S[0]),
                             T.address_of(B[T.Select(row < 2, row, 0) * 256 + T.Select(row < 2, 32, 0)])))


@T.prim_func
def guarded_address_expected(B: T.Buffer((256,), "uint8"), row: T.int32):
    S = T.alloc_buffer((16,), "uint8", scope="shared")
    T.evaluate(T.call_extern("int32", "tl::cp_async_gs<16>", T.address_of(S[0]),
                             T.address_of(B[T.Select(row < 2, row, 0) * 128 + T.Select(row < 2, 16, 0)])))


def test_a_guarded_fp4_address_is_halved_through_its_selects():
    tvm.ir.assert_structural_equal(
        lower_fp4_storage(guarded_address_before),
        guarded_address_expected.with_attr("global_symbol", guarded_address_before.attrs["global_symbol"]))
