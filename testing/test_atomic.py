"""T.atomic_add / atomic_max / atomic_min on elements and regions, in the simulator against torch."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_histogram_with_element_atomic_add(arch):
    @T.prim_func
    def hist(X: T.Tensor((4000,), "int32"), H: T.Tensor((16,), "float32")):
        with T.Kernel(T.ceildiv(4000, 256), threads=256) as bx:
            for i in T.Parallel(256):
                if bx * 256 + i < 4000:
                    T.atomic_add(H[X[bx * 256 + i]], 1.0)

    kernel = tilelang.compile(hist, target=f"musa -arch={arch}")
    assert "tl::AtomicAdd(&H[" in kernel.get_device_source()
    x = torch.randint(0, 16, (4000,), dtype=torch.int32)
    h = torch.zeros(16)
    kernel(x, h)
    torch.testing.assert_close(h, torch.bincount(x, minlength=16).float())


@pytest.mark.parametrize("kind", ["add", "max", "min"])
def test_region_atomics_from_every_block(kind):
    M, N, BM = 96, 40, 32

    @T.prim_func
    def reduce_rows(A: T.Tensor((M, N), "float32"), Out: T.Tensor((N,), "float32")):
        with T.Kernel(M // BM, threads=128) as bx:
            for r in T.serial(BM):
                getattr(T, f"atomic_{kind}")(Out[0:N], A[bx * BM + r, 0:N])

    kernel = tilelang.compile(reduce_rows)
    a = rand((M, N), torch.float32, 4)
    init = {"add": torch.zeros(N), "max": torch.full((N,), -1e30), "min": torch.full((N,), 1e30)}[kind]
    out = init.clone()
    kernel(a, out)
    expected = {"add": a.sum(0), "max": a.amax(0), "min": a.amin(0)}[kind]
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-4)


def test_atomic_add_returns_previous_value():
    @T.prim_func
    def ticket(Counter: T.Tensor((1,), "int32"), Tickets: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            Tickets[tx] = T.atomic_add(Counter[0], 1, return_prev=True)

    kernel = tilelang.compile(ticket)
    counter = torch.zeros(1, dtype=torch.int32)
    tickets = torch.full((128,), -1, dtype=torch.int32)
    kernel(counter, tickets)
    assert counter.item() == 128 and sorted(tickets.tolist()) == list(range(128))


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_tile_atomic_add_at_an_origin(arch):
    """`T.atomic_add(C[by * bm, bx * bn], C_local)` (split-K's epilogue): the destination is the region at that
    corner with the fragment's shape, every split adding its partial tile."""
    M, N, bm, bn, splits = 64, 96, 32, 32, 3

    @T.prim_func
    def main(A: T.Tensor((splits, M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bn, M // bm, splits, threads=128) as (bx, by, bz):
            C_local = T.alloc_fragment((bm, bn), "float32")
            T.copy(A[bz, by * bm, bx * bn], C_local)
            T.atomic_add(C[by * bm, bx * bn], C_local)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "tl::AtomicAdd(&C[" in kernel.get_kernel_source()
    a = rand((splits, M, N), torch.float32, 5)
    c = torch.zeros(M, N)
    kernel(a, c)
    torch.testing.assert_close(c, a.sum(0), rtol=1e-5, atol=1e-5)
