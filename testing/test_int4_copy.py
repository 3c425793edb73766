"""T.copy of int4 / uint4 tiles (issue 38): packed storage, two elements a byte (element 2k in the low nibble of
byte k), passed as int8 / uint8 tensors of half the elements as upstream's tests pack them. A copy of an even number
of elements from an even index along the last dimension is a copy of bytes (vectorized, pipelined, asynchronous as
any byte copy); one that would move nibbles between bytes is an error at its line."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import line_of
from tilelang_musa.errors import UnsupportedError

ARCHS = ["mp_31", "mp_22"]
M, K, BM, BK = 64, 256, 32, 64


def pack_int4(values):
    """Upstream's pack_int4: int8 values in [-8, 8), element 2k in the low nibble of byte k."""
    wide = values.to(torch.int16)
    return ((wide[..., ::2] & 0x0F) | ((wide[..., 1::2] & 0x0F) << 4)).to(torch.int8)


def unpack(packed, signed=True):
    codes = torch.stack([packed.to(torch.int32) & 15, (packed.to(torch.int32) >> 4) & 15], -1).flatten(-2)
    return codes - 16 * (codes >= 8).to(torch.int32) if signed else codes


def random_int4(shape, seed):
    return torch.randint(-8, 8, shape, generator=torch.Generator().manual_seed(seed), dtype=torch.int8)


def pipelined_copy(src_dtype, dst_dtype):
    """B's tile (by, ko) = A's, through a shared tile in a T.Pipelined loop; C[m, k] = A's element, read from the
    shared tile after the copy (int32, sign extended for int4)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), src_dtype), B: T.Tensor((M, K), dst_dtype), C: T.Tensor((M, K), T.int32)):
        with T.Kernel(M // BM, threads=128) as by:
            S = T.alloc_shared((BM, BK), dst_dtype)
            for ko in T.Pipelined(K // BK, num_stages=2):
                T.copy(A[by * BM, ko * BK], S)
                T.copy(S, B[by * BM, ko * BK])
                for i, j in T.Parallel(BM, BK):
                    C[by * BM + i, ko * BK + j] = T.cast(S[i, j], T.int32)

    return main


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("src_dtype,dst_dtype", [("int4", "int4"), ("uint4", "uint4"), ("int4", "uint4")])
def test_pipelined_tiles_move_as_bytes(arch, src_dtype, dst_dtype):
    kernel = tilelang.compile(pipelined_copy(src_dtype, dst_dtype), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert re.search(r"tl::cp_async_gs(_conditional)?<16>", source)  # the load: 16-byte LDLMS copies, 32 elements
    assert "tl::vec<unsigned char, 16>" in source  # the store: 16-byte vectors
    assert "int4_nibble_store" not in source  # no element of the copies moves by itself
    values = random_int4((M, K), 51)
    a, b, c = pack_int4(values), torch.empty(M, K // 2, dtype=torch.int8), torch.empty(M, K, dtype=torch.int32)
    kernel(a, b, c)
    assert torch.equal(b, a)
    assert torch.equal(c, unpack(a, signed=dst_dtype == "int4"))


@pytest.mark.parametrize("arch", ARCHS)
def test_a_shared_tile_stored_whole_and_async_copied(arch):
    """T.async_copy of a slice starting at an even element, then T.copy of the whole tile to global memory (on
    mp_31 a store from shared memory, a TME candidate)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), T.int4), B: T.Tensor((M, 128), T.int4)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((M, 128), T.int4)
            T.async_copy(A[0:M, 64:192], S)
            T.ptx_wait_group(0)
            T.sync_threads()
            T.copy(S, B)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "tl::cp_async_gs<16>" in kernel.get_kernel_source()
    a = pack_int4(random_int4((M, K), 52))
    b = torch.empty(M, 64, dtype=torch.int8)
    kernel(a, b)
    assert torch.equal(b, a[:, 32:96])


def copy_at(offset, extent, src_dtype="int4", dst_dtype="int4", rows=M):
    @T.prim_func
    def main(A: T.Tensor((rows, K), src_dtype), B: T.Tensor((rows, K), dst_dtype)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((rows, extent), dst_dtype)
            T.copy(A[0, offset], S)
            T.copy(S, B[0, 0])

    return main


@pytest.mark.parametrize("offset,extent,detail", [
    (1, 64, "the copy starts at element 1"),
    (0, 63, "the copy moves 63"),
])
def test_a_copy_moving_nibbles_between_bytes_is_an_error_at_its_line(offset, extent, detail):
    with pytest.raises(UnsupportedError, match=rf"T.copy: src `A` is int4, two elements a byte, and {detail} along "
                                               r"its last dimension, which is not provably even") as raised:
        copy_at(offset, extent)
    assert raised.value.loc.lineno == line_of(copy_at, "T.copy(A[0, offset], S)")


def test_a_symbolic_offset_must_be_provably_even():
    with pytest.raises(UnsupportedError, match=r"the copy starts at element k \+ 2"):
        @T.prim_func
        def main(A: T.Tensor((M, K), T.int4), B: T.Tensor((M, K), T.int4), k: T.int32):
            with T.Kernel(1, threads=128):
                S = T.alloc_shared((M, 64), T.int4)
                T.copy(A[0, k + 2], S)
                T.copy(S, B[0, 0])


def test_a_column_and_a_converting_copy_are_errors():
    with pytest.raises(UnsupportedError, match=r"and the copy moves 1 along its last dimension"):
        @T.prim_func
        def column(A: T.Tensor((M, K), T.int4), B: T.Tensor((M, K), T.int4)):
            with T.Kernel(1, threads=128):
                S = T.alloc_shared((M, 2), T.int4)
                T.copy(A[0:M, 4], S[0:M, 0])
                T.copy(S, B[0:M, 0:2])

    with pytest.raises(UnsupportedError, match=r"`A` \(int4\) -> `S` \(int8\): a copy that converts int4 / uint4 "
                                               r"elements is not supported"):
        copy_at(0, 64, dst_dtype="int8")


def gemm_nt_int4(size, block):
    """Upstream main's examples/gemm_int4 kernel: int4 tiles copied in a T.Pipelined loop, then T.gemm of them."""
    @T.prim_func
    def main(A: T.Tensor((size, size), T.int4), B: T.Tensor((size, size), T.int4),
             C: T.Tensor((size, size), T.int32)):
        with T.Kernel(T.ceildiv(size, block), T.ceildiv(size, block), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block, block), T.int4)
            B_shared = T.alloc_shared((block, block), T.int4)
            C_local = T.alloc_fragment((block, block), T.int32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(size, block), num_stages=3):
                T.copy(A[by * block, ko * block], A_shared)
                T.copy(B[bx * block, ko * block], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block, bx * block])

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_upstreams_int4_gemm_example(arch):
    kernel = tilelang.compile(gemm_nt_int4(128, 64), out_idx=-1, target=f"musa -arch={arch}")
    a, b = random_int4((128, 128), 53), random_int4((128, 128), 54)
    c = kernel(pack_int4(a), pack_int4(b))
    assert torch.equal(c, a.to(torch.int32) @ b.to(torch.int32).T)
