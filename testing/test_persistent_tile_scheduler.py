"""T.PersistentTileScheduler: upstream's persistent tile scheduler (a `while sched.valid():` loop over the tiles a
block owns: indices w, w + num_workers, ...; column- or row-major, in swizzle panels). A persistent tile copy
in the simulator visits every tile exactly once, against torch; the decode against a Python model of upstream's."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.errors import CompileError


def _model(tile_id, fast_n, slow_n, swizzle, column_major):
    """upstream's coord(), in Python"""
    group = tile_id // (fast_n * swizzle)
    base = group * swizzle
    width = max(1, min(swizzle, slow_n - base))
    in_group = tile_id - group * fast_n * swizzle
    fast, slow = in_group // width, base + in_group % width
    return (fast, slow) if column_major else (slow, fast)


def _persistent_scale(M, N, bm, bn, workers, swizzle, column_major):
    m_tiles, n_tiles = M // bm, N // bn

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32),
             Visits: T.Tensor((m_tiles, n_tiles), T.int32), Order: T.Tensor((m_tiles, n_tiles), T.int32)):
        with T.Kernel(workers, threads=128) as block_id:
            sched = T.PersistentTileScheduler(m_tiles, n_tiles, num_workers=workers, swizzle_size=swizzle,
                                              column_major=column_major, name="sched")
            sched.init(block_id)
            while sched.valid():
                bx, by = sched.m_idx, sched.n_idx
                for i, j in T.Parallel(bm, bn):
                    B[bx * bm + i, by * bn + j] = A[bx * bm + i, by * bn + j] * 2.0
                if T.get_thread_binding() == 0:
                    Visits[bx, by] = Visits[bx, by] + 1
                    Order[bx, by] = sched.current_iter * workers + block_id
                sched.next_tile()

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("swizzle,column_major", [(1, True), (3, True), (2, False)])
def test_every_tile_once_in_upstream_order(arch, swizzle, column_major):
    M, N, bm, bn, workers = 160, 224, 32, 32, 6  # 5 x 7 tiles, 6 workers: uneven waves and a narrow last panel
    kernel = tilelang.compile(_persistent_scale(M, N, bm, bn, workers, swizzle, column_major),
                              target=f"musa -arch={arch}")
    assert "while (" in kernel.get_kernel_source() and "sched_m_idx" in kernel.get_kernel_source()
    a, b = rand((M, N), torch.float32, 71), poison((M, N), torch.float32)
    visits = torch.zeros((M // bm, N // bn), dtype=torch.int32)
    order = torch.full((M // bm, N // bn), -1, dtype=torch.int32)
    kernel(a, b, visits, order)
    torch.testing.assert_close(b, a * 2.0)
    assert torch.equal(visits, torch.ones_like(visits))
    fast_n, slow_n = (M // bm, N // bn) if column_major else (N // bn, M // bm)
    for t in range((M // bm) * (N // bn)):  # linear index t is the tile upstream's decode gives
        assert order[_model(t, fast_n, slow_n, swizzle, column_major)].item() == t


def test_stateless_scheduler_has_only_coord():
    with pytest.raises(CompileError, match="stateful=False"):
        @T.prim_func
        def main(A: T.Tensor((4,), T.int32)):
            with T.Kernel(2, threads=32) as bid:
                sched = T.PersistentTileScheduler(2, 2, num_workers=2, stateful=False)
                A[bid] = sched.m_idx


@pytest.mark.parametrize("arch", ["mp_31"])
def test_default_workers_are_the_blocks_launched(arch):
    m_tiles, n_tiles, workers = 3, 5, 4

    @T.prim_func
    def main(Order: T.Tensor((m_tiles, n_tiles), T.int32)):
        with T.Kernel(workers, threads=32) as block_id:
            sched = T.PersistentTileScheduler(m_tiles, n_tiles)
            sched.init(block_id)
            while sched.valid():
                if T.get_thread_binding() == 0:
                    Order[sched.m_idx, sched.n_idx] = sched.linear_idx
                sched.next_tile()

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    order = torch.full((m_tiles, n_tiles), -1, dtype=torch.int32)
    kernel(order)
    assert sorted(order.flatten().tolist()) == list(range(m_tiles * n_tiles))
