"""A T.Parallel nest that reads a fragment at a row offset a serial loop around it fixes (`f[r + s * 16, d]` under
`if r < 16:`) runs where the fragment lives only where the thread of each iteration holds the element of every offset
the loop can take (the iterations the `if` lets through, checked for s = 0 and s = 1); otherwise the fragment is
exchanged through shared memory, as before. Both read the right elements on mp_22 and mp_31."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

ROWS, COLS, HALF = 32, 16, 16


def _halves_of_a_copied_fragment():
    @T.prim_func
    def main(A: T.Tensor((ROWS, COLS), "float32"), B: T.Tensor((ROWS, COLS), "float32")):
        with T.Kernel(1, threads=128) as _:
            f = T.alloc_fragment((ROWS, COLS), "float32")
            T.copy(A, f)  # the coalesced plan, a row per 4 threads: rows 16 apart live on different threads
            for s in range(2):
                for r, d in T.Parallel(ROWS, COLS):
                    if r < HALF:
                        B[s * HALF + r, d] = f[r + s * HALF, d] * 2.0

    return main


@pytest.mark.parametrize("arch", ["mp_22", "mp_31"])
def test_offset_rows_another_thread_holds_go_through_an_exchange(arch):
    kernel = tilelang.compile(_halves_of_a_copied_fragment(), target=f"musa -arch={arch}")
    assert "f_exchange" in kernel.get_kernel_source()  # (the warning naming it is given once a process)
    a = rand((ROWS, COLS), torch.float32, seed=3)
    b = poison((ROWS, COLS), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a * 2)


def _halves_of_a_wide_fragment():
    @T.prim_func
    def main(A: T.Tensor((ROWS, 4 * COLS), "float32"), B: T.Tensor((ROWS, 4 * COLS), "float32")):
        with T.Kernel(1, threads=128) as _:
            f = T.alloc_fragment((ROWS, 4 * COLS), "float32")
            T.copy(A, f)  # 64 columns: a row per 16 threads, rows 8 apart on the same threads
            for s in range(2):
                for r, d in T.Parallel(ROWS, 4 * COLS):
                    if r < HALF:
                        B[s * HALF + r, d] = f[r + s * HALF, d] * 2.0

    return main


@pytest.mark.parametrize("arch", ["mp_22", "mp_31"])
def test_offset_rows_the_same_thread_holds_are_read_in_place(arch, recwarn):
    kernel = tilelang.compile(_halves_of_a_wide_fragment(), target=f"musa -arch={arch}")
    assert "f_exchange" not in kernel.get_kernel_source() and "buf_dyn_shmem" not in kernel.get_kernel_source()
    assert not [w for w in recwarn if "exchange" in str(w.message) or "shared-memory tile" in str(w.message)]
    a = rand((ROWS, 4 * COLS), torch.float32, seed=4)
    b = poison((ROWS, 4 * COLS), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a * 2)
