"""T.named_barrier_arrive(id, count): upstream's one-sided `bar.arrive` (issue 2188). The arrival counts toward
named barrier `id`, whose waiters call T.sync_threads(id, count) (with count the whole block too: that
T.sync_threads is then the named barrier, not __syncthreads). On mp_31 both become one asynchronous barrier:
`tl::barrier_arrive` and `tl::barrier_sync` on the same id; mp_22 has no asynchronous barriers (a named error)."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.errors import CompileError


def _handoff():  # upstream's issue-2188 program
    @T.prim_func
    def kernel(inp: T.Tensor((1,), T.int32), out: T.Tensor((1,), T.int32)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            slot = T.alloc_shared((1,), T.int32)
            if tx < 32:
                if tx == 0:
                    slot[0] = inp[0] + 1
                T.named_barrier_arrive(10, 64)
                T.sync_threads(11, 64)
            else:
                T.sync_threads(10, 64)
                if tx == 32:
                    out[0] = slot[0]
                T.named_barrier_arrive(11, 64)

    return kernel


def test_upstream_handoff_on_mp31():
    kernel = tilelang.compile(_handoff(), target="musa -arch=mp_31")
    source = kernel.get_kernel_source()
    arrives = re.findall(r"tl::barrier_arrive\((\d+)\);", source)
    syncs = re.findall(r"tl::barrier_sync\((\d+)\);", source)
    assert len(arrives) == 2 and sorted(arrives) == sorted(syncs), source  # each arrive meets its sync's barrier
    assert "__syncthreads();" in source  # only the prologue's, after the barriers' initialisation
    out = torch.full((1,), -7, dtype=torch.int32)
    kernel(torch.tensor([41], dtype=torch.int32), out)
    assert out.item() == 42


def _pipeline(rounds, width):
    """Producer warp stages a row per round; consumer warp reads it after `ready`, frees the slot with `empty`."""

    @T.prim_func
    def main(A: T.Tensor((rounds, width), T.float32), B: T.Tensor((rounds, width), T.float32)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            slot = T.alloc_shared((width,), T.float32)
            for r in T.serial(rounds):
                if tx < 32:
                    if r > 0:
                        T.sync_threads(2, 64)  # wait until the consumer freed the slot
                    slot[tx] = A[r, tx] * 2.0
                    T.named_barrier_arrive(1, 64)
                else:
                    T.sync_threads(1, 64)  # wait for the row
                    B[r, tx - 32] = slot[tx - 32] + 1.0
                    if r < rounds - 1:
                        T.named_barrier_arrive(2, 64)

    return main


def test_handoff_over_many_phases_on_mp31():
    kernel = tilelang.compile(_pipeline(6, 32), target="musa -arch=mp_31")
    a, b = rand((6, 32), torch.float32, 61), poison((6, 32), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a * 2.0 + 1.0)


def test_mp22_has_no_named_barriers():
    with pytest.raises(CompileError, match="mp_22 does not have|asynchronous barrier"):
        tilelang.compile(_handoff(), target="musa -arch=mp_22")


@pytest.mark.parametrize("args,message", [((16, 64), "barrier_id=16 must be a compile-time integer from 0 to 15"),
                                          ((3, 128), "thread_count=128 must be a compile-time int from 1 to the "
                                                     "block's 64 threads")])
def test_bad_arguments_are_named(args, message):
    with pytest.raises(CompileError, match=message):
        @T.prim_func
        def main(A: T.Tensor((1,), T.int32)):
            with T.Kernel(1, threads=64):
                T.named_barrier_arrive(*args)
