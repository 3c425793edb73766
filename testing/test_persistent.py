"""T.Persistent: a persistent kernel's tile loop (upstream examples/gemm/example_gemm_persistent.py). A grid of
`wave_size` blocks walks every tile of the domain once, in column groups of `group_size`; tiles past the domain
(a partial last group, a partial last wave) are skipped."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang.carver.arch import driver


def persistent_gemm(M, N, K, blocks, bm=64, bn=64, bk=32, group_size=8):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(blocks, threads=128) as block_id:
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            for bx, by in T.Persistent([T.ceildiv(M, bm), T.ceildiv(N, bn)], blocks, block_id, group_size):
                T.clear(acc)
                for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                    T.copy(A[bx * bm, k * bk], A_s)
                    T.copy(B[k * bk, by * bn], B_s)
                    T.gemm(A_s, B_s, acc)
                T.copy(acc, C[bx * bm, by * bn])

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("blocks, group_size", [(3, 8), (4, 2), (16, 3)])
def test_every_tile_is_computed_once(arch, blocks, group_size):
    M, N, K = 192, 320, 64  # 3 x 5 tiles: groups of 2 or 3 leave a partial last group
    kernel = tilelang.compile(persistent_gemm(M, N, K, blocks, group_size=group_size), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "for (int wave = 0;" in src
    a, b = rand((M, K), torch.float16, 1), rand((K, N), torch.float16, 2)
    c = poison((M, N), torch.float32)
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)


def test_tiles_of_a_wave_are_numbered_group_by_group():
    # each tile writes its coordinates at its number in upstream's order (column group, row, column in group),
    # numbered over the padded domain: the missing sixth column's tiles are skipped and leave their slots alone
    rows, cols, group = 3, 5, 2
    slots = 3 * rows * group

    @T.prim_func
    def order(O: T.Tensor((slots, 2), "int32")):
        with T.Kernel(4, threads=32) as block_id:
            for bx, by in T.Persistent([rows, cols], 4, block_id, group):
                tile = (by // group) * rows * group + bx * group + by % group
                if T.get_thread_binding() == 0:
                    O[tile, 0] = bx
                    O[tile, 1] = by

    out = torch.full((slots, 2), -1, dtype=torch.int32)
    tilelang.compile(order, target="musa -arch=mp_31")(out)
    expected = [(r, g * group + c) if g * group + c < cols else (-1, -1)
                for g in range(3) for r in range(rows) for c in range(group)]
    assert [tuple(x) for x in out.tolist()] == expected


def test_driver_answers_the_simulated_devices_multiprocessors():
    assert driver.get_num_sms() == 56  # the default target, mp_31 (MTT S5000)
    assert driver.get_shared_memory_per_block() == 196608
    assert "S5000" in driver.get_device_name()
