"""Barriers between distinct "shared.dyn" tiles: TVM's analysis takes any two accesses of that scope to overlap, so
a loop reading one tile and writing another got a barrier in every iteration. ThreadSync analyses the tiles as
distinct (PlanDynamicSharedMemory places the barriers its byte sharing needs), so the barrier goes before the
loop; a real dependence inside a loop still gets one there."""

import re

import pytest
import torch
import tvm
from tvm.script import tirx as S

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.transform.thread_sync import ThreadSync


def test_a_loop_between_two_tiles_gets_its_barrier_before_it():
    @S.prim_func(private=True)
    def before(A: S.handle("float32", "global")):
        Ag = S.decl_buffer((128,), "float32", data=A)
        tx = S.launch_thread("threadIdx.x", 128)
        V = S.alloc_buffer((64,), "float32", scope="shared.dyn")
        W = S.alloc_buffer((4096,), "float32", scope="shared.dyn")
        if tx < 64:
            V[tx] = Ag[tx]
        for it in range(32):
            W[it * 128 + tx] = V[it * 2 + tx // 64]
        Ag[tx] = W[tx]

    @S.prim_func(private=True)
    def expected(A: S.handle("float32", "global")):
        Ag = S.decl_buffer((128,), "float32", data=A)
        tx = S.launch_thread("threadIdx.x", 128)
        V = S.alloc_buffer((64,), "float32", scope="shared.dyn")
        W = S.alloc_buffer((4096,), "float32", scope="shared.dyn")
        if tx < 64:
            V[tx] = Ag[tx]
        S.evaluate(S.call_intrin("int32", "tirx.tvm_storage_sync", "shared.dyn"))
        for it in range(32):
            W[it * 128 + tx] = V[it * 2 + tx // 64]
        S.evaluate(S.call_intrin("int32", "tirx.tvm_storage_sync", "shared.dyn"))
        Ag[tx] = W[tx]

    got = ThreadSync("shared.dyn")(tvm.IRModule({"main": before}))["main"]
    tvm.ir.assert_structural_equal(got, expected)


def test_the_pass_of_a_scope_the_kernel_has_no_buffer_of_leaves_it_as_it_is():
    """ThreadSync("shared") on a kernel of "shared.dyn" tiles only: no access for a barrier to order, so the
    function comes back unchanged (the same object: no rewrite ran), while the "shared.dyn" pass places barriers."""
    @S.prim_func(private=True)
    def before(A: S.handle("float32", "global")):
        Ag = S.decl_buffer((128,), "float32", data=A)
        tx = S.launch_thread("threadIdx.x", 128)
        W = S.alloc_buffer((128,), "float32", scope="shared.dyn")
        if tx < 64:
            W[tx] = Ag[tx]
        Ag[tx] = W[127 - tx]

    got = ThreadSync("shared")(tvm.IRModule({"main": before}))["main"]
    assert got.same_as(before)
    tvm.ir.assert_structural_equal(got, before)
    assert "tvm_storage_sync" in ThreadSync("shared.dyn")(tvm.IRModule({"main": before}))["main"].script()


def test_a_dependence_carried_by_the_loop_keeps_its_barrier_inside():
    @S.prim_func(private=True)
    def before(A: S.handle("float32", "global")):
        Ag = S.decl_buffer((128,), "float32", data=A)
        tx = S.launch_thread("threadIdx.x", 128)
        W = S.alloc_buffer((128,), "float32", scope="shared.dyn")
        for it in range(4):
            W[tx] = Ag[tx]
            Ag[tx] = W[127 - tx]

    got = ThreadSync("shared.dyn")(tvm.IRModule({"main": before}))["main"].script()
    loop = got[got.index("for it"):]
    assert loop.count("tvm_storage_sync") == 2, got  # read after the write, and the next write after the read


def scaled_copy():
    @T.prim_func
    def f(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A = T.alloc_shared((64, 64), "float32")
            B = T.alloc_shared((64, 64), "float32")
            T.copy(X, A)
            for i, j in T.Parallel(64, 64):
                B[i, j] = A[i, j] * 2.0
            T.copy(B, Y)

    return f


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_a_copy_between_tiles_has_no_barrier_in_its_loop(arch):
    kernel = tilelang.compile(scaled_copy(), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    loop = re.search(r"for \(int (\w+) = 0; \1 < \d+; \+\+\1\) \{\n[^\n]*\bB \+[^\n]*\n\s*\}", src)
    assert loop is not None and "__syncthreads" not in loop.group(0), src
    x, y = rand((64, 64), torch.float32, 1), poison((64, 64), torch.float32)
    kernel(x, y)
    torch.testing.assert_close(y, x * 2.0)
