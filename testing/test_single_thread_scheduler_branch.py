"""A persistent kernel's scheduler (pod-attn's fused attention): `if tx == 0:` one thread takes a tile with
`T.atomic_add(counter[...], 1, return_prev=True)` on a global counter, writes it to a shared slot and reads it back
(under a nested `if` on another shared slot it wrote), then every thread reads the slot after a barrier.
One thread takes the branch, so it needs no barrier inside; the barrier after it orders the write for the readers.
ThreadSync failed ("needs a barrier inside the branch"): branch_disjointness.py took the atomic's `&counter[i]` for
an address of shared memory (any `address_of` made the branch opaque), and a barrier SyncWriteAfterWrite had put in
the branch (one thread's two writes of the slot) read as one the analysis placed there."""

import pytest
import torch
import tvm
from tvm.script import tirx as S

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.transform.thread_sync import ThreadSync

ARCHS = ["mp_31", "mp_22"]
TILES, SLOTS, THREADS = 7, 3, 128


def test_the_scheduler_branch_gets_no_barrier_inside_and_one_after():
    @S.prim_func(private=True)
    def before(C: S.handle("int32", "global"), O: S.handle("int32", "global")):
        Cg = S.decl_buffer((2,), "int32", data=C)
        Og = S.decl_buffer((128,), "int32", data=O)
        tx = S.launch_thread("threadIdx.x", 128)
        done = S.alloc_buffer((1,), "int32", scope="shared")
        tile = S.alloc_buffer((1,), "int32", scope="shared")
        if tx == 0:
            done[0] = S.if_then_else(Cg[0] >= 5, 1, 0)
            tile[0] = -1
            if done[0] == 0:
                # the counter picked by a shared slot, as pod-attn's queue cursors (`counter[op_shared[0]]`)
                tile[0] = S.call_extern("int32", "tl::AtomicAddRet", S.address_of(Cg[tile[0] + 1]), 1)
                if tile[0] >= 5:
                    tile[0] = -1
        Og[tx] = tile[0]

    @S.prim_func(private=True)
    def expected(C: S.handle("int32", "global"), O: S.handle("int32", "global")):
        Cg = S.decl_buffer((2,), "int32", data=C)
        Og = S.decl_buffer((128,), "int32", data=O)
        tx = S.launch_thread("threadIdx.x", 128)
        done = S.alloc_buffer((1,), "int32", scope="shared")
        tile = S.alloc_buffer((1,), "int32", scope="shared")
        if tx == 0:
            done[0] = S.if_then_else(Cg[0] >= 5, 1, 0)
            tile[0] = -1
            cond: S.let[S.bool] = done[0] == 0  # (ThreadSync binds a condition's shared reads)
            if cond:
                tile[0] = S.call_extern("int32", "tl::AtomicAddRet", S.address_of(Cg[tile[0] + 1]), 1)
                cond_1: S.let[S.bool] = tile[0] >= 5
                if cond_1:
                    tile[0] = -1
        S.evaluate(S.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))  # the readers after the writer
        Og[tx] = tile[0]

    result = ThreadSync("shared")(tvm.IRModule({"main": before}))["main"]
    tvm.ir.assert_structural_equal(result, expected, map_free_vars=True)


def _persistent(user_barrier: bool):
    """SLOTS blocks take TILES tiles from a global counter, one at a time, until none is left; each tile's row of
    `A` doubled (plus its taker's block index, which the tests subtract) into `O`."""
    @T.prim_func
    def main(A: T.Tensor((TILES, THREADS), "float32"), Counter: T.Tensor((1,), "int32"),
             O: T.Tensor((TILES, THREADS), "float32"), Taker: T.Tensor((TILES,), "int32")):
        with T.Kernel(SLOTS, threads=THREADS) as slot:
            tx = T.get_thread_binding()
            done = T.alloc_shared([1], "int32")
            tile = T.alloc_shared([1], "int32")
            for _ in T.serial(TILES + 1):
                if tx == 0:
                    done[0] = T.if_then_else(Counter[0] >= TILES, 1, 0)
                    tile[0] = -1
                    if done[0] == 0:
                        tile[0] = T.atomic_add(Counter[0], 1, return_prev=True)
                        if tile[0] >= TILES:
                            tile[0] = -1
                if user_barrier:
                    T.sync_threads()
                if tile[0] >= 0:
                    for i in T.Parallel(THREADS):
                        O[tile[0], i] = A[tile[0], i] * 2.0 + slot
                    Taker[tile[0]] = slot
                T.sync_threads()

    return main


@pytest.mark.parametrize("user_barrier", [True, False], ids=["user_barrier", "placed_barrier"])
@pytest.mark.parametrize("arch", ARCHS)
def test_a_persistent_kernel_takes_every_tile_once_and_matches_torch(arch, user_barrier, monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")  # the race detector checks the barriers placed
    kernel = tilelang.compile(_persistent(user_barrier), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    branch = source[source.index("if (((int)threadIdx.x) == 0) {"):]
    branch = branch[:branch.index("\n    }\n") + 6]
    assert "AtomicAddRet" in branch and "sync" not in branch and "barrier" not in branch, branch
    after = source[source.index(branch) + len(branch):]
    assert after.lstrip().startswith("__syncthreads();"), after  # the readers wait for the writer
    a = rand((TILES, THREADS), torch.float32, 5)
    counter = torch.zeros(1, dtype=torch.int32)
    o, taker = poison((TILES, THREADS), torch.float32), torch.full((TILES,), -1, dtype=torch.int32)
    kernel(a, counter, o, taker)
    assert counter.item() >= TILES and bool(((taker >= 0) & (taker < SLOTS)).all()), taker
    torch.testing.assert_close(o - taker[:, None].float(), a * 2.0)
