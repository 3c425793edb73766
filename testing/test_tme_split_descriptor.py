"""TME copies of a dense (row-major) shared tile wider than one instruction's 256 elements: the descriptor splits the
tensor's innermost dimension into blocks, so that one instruction's box [block, width / block, ...] is the tile's
bytes (upstream's deepseek_v32 sparse_mla_fwd_pipelined loads a [heads, 576] row-major tile so); in the simulator
against torch."""

import functools

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

MP31 = "musa -arch=mp_31"


@functools.cache
def q_rows_kernel(target: str = MP31):
    """Rows h0:h0+16 of Q[b, s] (576 wide, bfloat16) by T.tma_copy into a row-major tile, then out by T.copy."""

    @T.prim_func
    def rows(Q: T.Tensor((2, 3, 32, 576), "bfloat16"), O: T.Tensor((2, 3, 32, 576), "bfloat16")):
        with T.Kernel(2, 3, 2, threads=128) as (hb, s, b):
            tile = T.alloc_shared((16, 576), "bfloat16")
            barrier = T.alloc_barrier(128)
            T.tma_copy(Q[b, s, hb * 16:(hb + 1) * 16, :], tile, barrier=barrier)
            T.barrier_arrive(barrier)
            T.barrier_wait(barrier, 0)
            T.copy(tile, O[b, s, hb * 16:(hb + 1) * 16, :])

    return tilelang.compile(rows, target=target)


def test_a_wide_dense_tile_is_one_load_through_a_split_descriptor():
    kernel = q_rows_kernel()
    src = kernel.get_kernel_source()
    # blocks of 192 elements (384 bytes): 3 of them make the 576-wide rows, 16 rows, one (s, b) each
    assert "tl::tma_load<0, 3, 1, CacheHint::CACHE_NORMAL, CacheHint::CACHE_NORMAL>(desc_Q_split192, 1, " \
           "&tile[0], v5i32_t{192, 3, 16, 1, 1}, v5i32_t{0, 0, ((int)blockIdx.x) * 16, (int)blockIdx.y, " \
           "(int)blockIdx.z});" in src
    assert "tl::barrier_expect_tx(1, 18432);" in src  # 16 x 576 x 2 bytes
    host = kernel.get_host_source()
    assert "muTensorDescriptorEncode(&desc_Q_split192, MU_TENSOR_DESCRIPTOR_DATA_TYPE_BFLOAT16, 5, (void*)Q" in host
    assert "muuint64_t dims[5] = {(muuint64_t)192, (muuint64_t)3, (muuint64_t)32, (muuint64_t)3, (muuint64_t)2};" \
        in host
    assert "muuint64_t strides[4] = {(muuint64_t)384, (muuint64_t)1152, (muuint64_t)36864, (muuint64_t)110592};" \
        in host
    q = rand((2, 3, 32, 576), torch.bfloat16, 11)
    o = poison((2, 3, 32, 576), torch.bfloat16)
    kernel(q, o)
    torch.testing.assert_close(o, q, rtol=0, atol=0)


def test_a_wide_dense_tile_is_one_store_through_a_split_descriptor():
    """The T.copy store of the same tile qualifies for the TME too (it stayed a plain copy before)."""
    src = q_rows_kernel().get_kernel_source()
    assert "tl::tma_store<0, 3, 1, CacheHint::CACHE_NORMAL, CacheHint::CACHE_NORMAL>(desc_O_split192, &tile[0], " \
           "v5i32_t{192, 3, 16, 1, 1}, v5i32_t{0, 0, ((int)blockIdx.x) * 16, (int)blockIdx.y" in src


def test_a_block_start_inside_the_row_picks_a_block_that_divides_it():
    """Columns 64:640 of a 1152-wide tensor: 192 does not divide the start, 64 does (9 blocks of 128 bytes)."""

    @T.prim_func
    def cols(A: T.Tensor((16, 1152), "float16"), B: T.Tensor((16, 576), "float16")):
        with T.Kernel(2, threads=128) as bx:
            tile = T.alloc_shared((8, 576), "float16")
            barrier = T.alloc_barrier(128)
            T.tma_copy(A[bx * 8:(bx + 1) * 8, 64:640], tile, barrier=barrier)
            T.barrier_arrive(barrier)
            T.barrier_wait(barrier, 0)
            T.copy(tile, B[bx * 8:(bx + 1) * 8, :], disable_tma=True)

    kernel = tilelang.compile(cols, target=MP31)
    src = kernel.get_kernel_source()
    assert "(desc_A_split64, 1, &tile[0], v3i32_t{64, 9, 8}, v3i32_t{0, 1, ((int)blockIdx.x) * 8});" in src
    a = rand((16, 1152), torch.float16, 12)
    b = poison((16, 576), torch.float16)
    kernel(a, b)
    torch.testing.assert_close(b, a[:, 64:640], rtol=0, atol=0)


def test_on_mp22_the_store_stays_a_plain_copy():
    @T.prim_func
    def store(A: T.Tensor((16, 576), "bfloat16"), B: T.Tensor((16, 576), "bfloat16")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((16, 576), "bfloat16")
            T.copy(A, tile)
            T.copy(tile, B)

    kernel = tilelang.compile(store, target="musa -arch=mp_22")
    assert "tma" not in kernel.get_kernel_source()
    a = rand((16, 576), torch.bfloat16, 13)
    b = poison((16, 576), torch.bfloat16)
    kernel(a, b)
    torch.testing.assert_close(b, a, rtol=0, atol=0)


def test_a_five_dimensional_tensor_has_no_dimension_left_to_split():
    @T.prim_func
    def load(A: T.Tensor((1, 1, 2, 16, 576), "float16")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((16, 576), "float16")
            barrier = T.alloc_barrier(128)
            T.tma_copy(A[0, 0, 0, :, :], tile, barrier=barrier)

    with pytest.raises(tilelang.CompileError) as info:
        tilelang.compile(load, target=MP31)
    message = str(info.value)
    assert "T.tma_copy: the box extent 576 of the innermost dimension of the copy exceeds the engine's 256" in message
    assert "A of fewer than 5 dimensions" in message and "T.tma_copy(A[0, 0, 0, :, :], tile" in message
