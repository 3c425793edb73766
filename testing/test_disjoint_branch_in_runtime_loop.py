"""A branch whose threads reach disjoint shared elements needs no barrier inside, also inside a loop whose trip count
is known only at run time (TileOPs' NSA top-k: its odd-even sort of a 64-slot pool runs once per chunk of a
`T.Pipelined(T.ceildiv(n, 32), num_stages=3)` loop). The sort's second phase runs on threads 0..30 (`if tx < 31:`,
a T.Parallel(31)); branch_disjointness.py enumerated every loop around its accesses, the run-time one too, so it
proved nothing and ThreadSync put a barrier over 31 threads inside the branch (not whole warps: no arch has one).
A loop that neither the index nor the conditions of an access read only repeats the same (thread, element) points:
it is left out of the enumeration now."""

import re

import pytest
import torch
import tvm
from tvm.script import tirx as S

import tilelang
import tilelang.language as T
from conftest import rand
from tilelang.errors import CompileError
from tilelang_musa.transform.thread_sync import ThreadSync

ARCHS = ["mp_31", "mp_22"]
POOL = 64


def test_the_sorts_range_branch_in_a_run_time_loop_gets_no_barrier_inside():
    @S.prim_func(private=True)
    def before(A: S.handle("float32", "global"), n: S.int32):
        Ag = S.decl_buffer((64,), "float32", data=A)
        tx = S.launch_thread("threadIdx.x", 32)
        Sh = S.alloc_buffer((64,), "float32", scope="shared")
        for it in range(n):  # the chunks: a run-time trip count
            if tx < 31:  # one phase of the sort: each thread its own pair (2tx+1, 2tx+2)
                v1: S.let[S.float32] = Sh[tx * 2 + 1]
                v2: S.let[S.float32] = Sh[tx * 2 + 2]
                if v1 < v2:
                    Sh[tx * 2 + 1] = v2
                    Sh[tx * 2 + 2] = v1
        Ag[tx] = Sh[tx]

    @S.prim_func(private=True)
    def expected(A: S.handle("float32", "global"), n: S.int32):
        Ag = S.decl_buffer((64,), "float32", data=A)
        tx = S.launch_thread("threadIdx.x", 32)
        Sh = S.alloc_buffer((64,), "float32", scope="shared")
        for it in range(n):  # every iteration, each thread reaches its own pair alone: no barrier in the loop
            if tx < 31:
                v1: S.let[S.float32] = Sh[tx * 2 + 1]
                v2: S.let[S.float32] = Sh[tx * 2 + 2]
                if v1 < v2:
                    Sh[tx * 2 + 1] = v2
                    Sh[tx * 2 + 2] = v1
        S.evaluate(S.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))
        Ag[tx] = Sh[tx]

    result = ThreadSync("shared")(tvm.IRModule({"main": before}))["main"]
    tvm.ir.assert_structural_equal(result, expected, map_free_vars=True)


def _top_k(chunks: int, pipelined: bool):
    """The NSA top-k pool on the kernel's 32 threads: filled with -inf, then per chunk (a run-time count, `n` scores)
    its 32 scores written into the upper half and the pool sorted, values with their indices."""
    @T.prim_func
    def main(V: T.Tensor((chunks * 32,), "float32"), n: T.int32, O: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32):
            s = T.alloc_shared((POOL,), "float32")
            ix = T.alloc_shared((POOL,), "int32")
            for p in T.Parallel(POOL):
                s[p] = -T.infinity("float32")
                ix[p] = 0
            loop = T.Pipelined(T.ceildiv(n, 32), num_stages=3) if pipelined else T.serial(T.ceildiv(n, 32))
            for it in loop:
                for c in T.Parallel(32):
                    s[32 + c] = T.if_then_else(it * 32 + c < n, V[it * 32 + c], -T.infinity("float32"))
                    ix[32 + c] = it * 32 + c
                T.sync_threads()
                for _ in T.serial(POOL):
                    for i in T.Parallel(POOL // 2):
                        v1 = s[i * 2]
                        v2 = s[i * 2 + 1]
                        i1 = ix[i * 2]
                        i2 = ix[i * 2 + 1]
                        if v1 < v2:
                            s[i * 2], s[i * 2 + 1] = v2, v1
                            ix[i * 2], ix[i * 2 + 1] = i2, i1
                    T.sync_threads()
                    for i in T.Parallel(POOL // 2 - 1):  # threads 0..30
                        v1 = s[i * 2 + 1]
                        v2 = s[i * 2 + 2]
                        i1 = ix[i * 2 + 1]
                        i2 = ix[i * 2 + 2]
                        if v1 < v2:
                            s[i * 2 + 1], s[i * 2 + 2] = v2, v1
                            ix[i * 2 + 1], ix[i * 2 + 2] = i2, i1
                    T.sync_threads()
            for c in T.Parallel(32):
                O[c] = ix[c]

    return main


@pytest.mark.parametrize("pipelined", [False, True], ids=["serial", "pipelined"])
@pytest.mark.parametrize("arch", ARCHS)
def test_top_k_pool_in_a_run_time_loop_compiles_and_matches_torch(arch, pipelined, monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")  # the race detector checks the barriers placed
    kernel = tilelang.compile(_top_k(4, pipelined), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "barrier_sync" not in source  # no barrier over part of the block
    swaps = re.findall(r"if \(v1\w* < v2\w*\) \{([^}]*)\}", source)
    assert swaps and not any("sync" in swap for swap in swaps)
    for n in (100, 32, 1):
        v, o = rand((128,), torch.float32, n), torch.full((32,), -7, dtype=torch.int32)
        kernel(v, n, o)
        k = min(n, 32)
        assert torch.equal(o[:k].long(), v[:n].topk(k).indices), n


def test_a_condition_reading_the_run_time_loop_counts_as_true():
    @S.prim_func(private=True)
    def before(A: S.handle("float32", "global"), n: S.int32):
        Ag = S.decl_buffer((32,), "float32", data=A)
        tx = S.launch_thread("threadIdx.x", 32)
        Sh = S.alloc_buffer((32,), "float32", scope="shared")
        for it in range(n):
            if tx % 2 == 0:
                if it * 32 + tx < n:  # reads the loop of a run-time extent: unknown, so every point counts
                    a: S.let[S.float32] = Sh[tx]
                    Sh[S.bitwise_xor(tx, 1)] = a
        Ag[tx] = Sh[tx]

    script = ThreadSync("shared")(tvm.IRModule({"main": before}))["main"].script()
    assert script.count("tvm_storage_sync") == 1, script  # after the loop, for every thread's read
    assert script.index("tvm_storage_sync") > script.index("Sh[tx ^ 1] = a"), script


def test_an_index_reading_the_run_time_loop_is_still_not_proven():
    @S.prim_func(private=True)
    def before(A: S.handle("float32", "global"), n: S.int32):
        Ag = S.decl_buffer((32,), "float32", data=A)
        tx = S.launch_thread("threadIdx.x", 32)
        Sh = S.alloc_buffer((32,), "float32", scope="shared")
        for it in range(n):
            if tx % 2 == 0:
                a: S.let[S.float32] = Sh[tx]
                Sh[(tx + it) % 32] = a  # iteration 1: thread 0 writes s[1]... and thread 2 reads s[2] at it = 2
        Ag[tx] = Sh[tx]

    with pytest.raises((CompileError, RuntimeError), match="inside the branch"):
        ThreadSync("shared")(tvm.IRModule({"main": before}))
