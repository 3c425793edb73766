"""A shared tile sized at run time (`T.alloc_shared((n,), ...)` with n a T.dynamic size): PlanDynamicSharedMemory
places it after the constant-size tiles, at an offset that is an expression of the sizes before it, and the host
wrapper computes the launch's shared-memory size from the call's sizes (opting in above 48 KiB)."""

import pytest
import torch
import tvm
from tvm import tirx
from tvm.tirx.script import builder as Tb

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.ir.attrs import OFFSET_ANNOTATION, SIZE_ATTR
from tilelang_musa.transform.plan_dynamic_shared_memory import plan_dynamic_shared_memory


def test_run_time_sized_tiles_go_after_the_constant_ones_at_expression_offsets():
    n = tvm.ir.expr.Var("n", "int32")
    dyn = Tb.buffer([n], "float32", scope="shared.dyn")
    fixed = Tb.buffer([100], "float32", scope="shared.dyn")
    dyn2 = Tb.buffer([n], "float16", scope="shared.dyn")
    use = tirx.Evaluate(tirx.call_extern("int32", "use"))
    before = tirx.PrimFunc([n], tirx.SeqStmt([tirx.AllocBuffer(b) for b in (dyn, fixed, dyn2)] + [use]))
    after = plan_dynamic_shared_memory(before, limit=196608)
    second = (tirx.Cast("int64", n) * 4 + 2047) // 1024 * 1024  # the first run-time tile's end, 1 KiB aligned
    expected = tirx.PrimFunc([n], tirx.SeqStmt([
        tirx.AllocBuffer(dyn, {OFFSET_ANNOTATION: tirx.const(1024, "int64")}),
        tirx.AllocBuffer(fixed, {OFFSET_ANNOTATION: 0}),
        tirx.AllocBuffer(dyn2, {OFFSET_ANNOTATION: tvm.sym.Analyzer().simplify(second)}),
        use,
    ]))
    tvm.ir.assert_structural_equal(after.body, expected.body)
    total = after.attrs[SIZE_ATTR]
    assert tvm.sym.Analyzer().can_prove_equal(total, second + tirx.Cast("int64", n) * 2)


def copy_through_shared():
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128):
            head = T.alloc_shared((100,), "float32")
            S = T.alloc_shared((N,), "float32")
            H = T.alloc_shared((N,), "float16")
            T.copy(A, S)
            T.copy(A[0:100], head)
            for i in T.Parallel(N):
                H[i] = T.cast(S[i] * 2.0 + head[i % 100], "float16")
            T.copy(H, B)

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_a_run_time_sized_tile_runs_at_each_calls_size(arch):
    kernel = tilelang.compile(copy_through_shared(), target=f"musa -arch={arch}")
    source, host = kernel.get_kernel_source(), kernel.get_host_source()
    assert "float* S = reinterpret_cast<float*>(buf_dyn_shmem + 1024);" in source, source
    assert "half_t* H = reinterpret_cast<half_t*>(buf_dyn_shmem + " in source
    assert "size_t smem = " in host and "N" in host.split("size_t smem = ")[1].split(";")[0], host
    assert "if (smem > 49152) {" in host  # a large call opts in at run time
    for n in (300, 12000, 300):  # 12000: 1 KiB + 48 000 + 24 000 B, past the 48 KiB default
        a = rand((n,), torch.float32, n)
        b = poison((n,), torch.float32)
        kernel(a, b)
        torch.testing.assert_close(b, (a * 2 + a[torch.arange(n) % 100]).half().float())


def test_a_call_past_the_device_limit_fails_at_launch_naming_the_size():
    kernel = tilelang.compile(copy_through_shared(), target="musa -arch=mp_31")
    n = 100000  # 1 KiB + 400 000 B (to the next KiB: 401 408) + 200 000 B
    with pytest.raises(Exception, match="cannot set 601408 bytes of dynamic shared memory"):
        kernel(rand((n,), torch.float32, 0), poison((n,), torch.float32))
