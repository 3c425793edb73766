"""A shared tile read in an `if` condition (`if s[i] > 0:`): ThreadSync binds the condition first
(hoist_condition_reads), so the stock analysis sees the read, orders it after the writes before it, and does not
fail; the bound condition keeps its short-circuit."""

import pytest
import torch
import tvm
from tvm.script import tirx as S

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.transform.thread_sync import ThreadSync

N = 128


def test_the_condition_is_bound_and_ordered_after_the_write():
    @S.prim_func(private=True)
    def before(A: S.handle("float32", "global")):
        Ag = S.decl_buffer((128,), "float32", data=A)
        tx = S.launch_thread("threadIdx.x", 128)
        Sh = S.alloc_buffer((128,), "float32", scope="shared")
        Sh[tx] = Ag[tx]
        if Sh[127 - tx] > S.float32(0):
            Ag[tx] = S.float32(1)

    @S.prim_func(private=True)
    def expected(A: S.handle("float32", "global")):
        Ag = S.decl_buffer((128,), "float32", data=A)
        tx = S.launch_thread("threadIdx.x", 128)
        Sh = S.alloc_buffer((128,), "float32", scope="shared")
        Sh[tx] = Ag[tx]
        S.evaluate(S.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))
        cond: S.let[S.bool] = Sh[127 - tx] > S.float32(0)
        if cond:
            Ag[tx] = S.float32(1)

    got = ThreadSync("shared")(tvm.IRModule({"main": before}))["main"]
    tvm.ir.assert_structural_equal(got, expected, map_free_vars=True)


def masked_copy():
    @T.prim_func
    def f(X: T.Tensor((N,), "float32"), K: T.Tensor((N // 8,), "int32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N) as bx:
            s = T.alloc_shared((N,), "float32")
            kept = T.alloc_shared((N // 8,), "int32")
            T.copy(X, s)
            T.copy(K, kept)
            for i in T.Parallel(N):
                if kept[i // 8] == 0:  # a shared read in the condition, written by the copy above
                    s[i] = 0.0
            for i in T.Parallel(N):
                if i + 1 < N and s[(i + 1) % N] < 0.0:  # short-circuit: s is read only when i + 1 < N
                    Y[i] = -1.0
                else:
                    Y[i] = s[i]

    return f


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_shared_reads_in_conditions_run_and_match(arch):
    kernel = tilelang.compile(masked_copy(), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "bool cond = " in src and "&&" in src, src
    x, k = rand((N,), torch.float32, 1), torch.randint(0, 2, (N // 8,), dtype=torch.int32)
    y = poison((N,), torch.float32)
    kernel(x, k, y)
    s = torch.where(k.repeat_interleave(8) == 0, torch.zeros_like(x), x)
    nxt = torch.cat([s[1:], s[:1]])
    ref = torch.where((torch.arange(N) + 1 < N) & (nxt < 0), torch.full_like(x, -1.0), s)
    torch.testing.assert_close(y, ref)
