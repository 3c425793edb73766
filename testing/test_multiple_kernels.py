"""A program with several `with T.Kernel(...)` scopes is several kernels, launched in order on one stream: each
sees what the ones before it wrote."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand


def add_then_reverse():
    @T.prim_func
    def two(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            tx = T.get_thread_binding()
            A[bx * 128 + tx] = A[bx * 128 + tx] + 1.0
        with T.Kernel(1, threads=256) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((256,), "float32")
            S[tx] = A[tx] * 2.0
            T.sync_threads()
            B[tx] = S[255 - tx]

    return two


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_two_kernel_scopes_are_two_launches_in_order(arch):
    kernel = tilelang.compile(add_then_reverse(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert re.findall(r"__global__ void __launch_bounds__\((\d+), 1\) (\w+)\(", source) == [
        ("128", "two_kernel"), ("256", "two_kernel_1")]
    host = kernel.get_host_source()
    assert host.index("musaLaunchKernel(two_kernel,") < host.index("musaLaunchKernel(two_kernel_1,")
    a = rand((256,), torch.float32, 31)
    expected = ((a + 1.0) * 2.0).flip(0)
    b = poison((256,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, expected)


def test_statements_between_kernel_scopes_are_an_error():
    @T.prim_func
    def mixed(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A[T.get_thread_binding()] = 1.0
        A[0] = 2.0
        with T.Kernel(1, threads=128) as bx:
            A[T.get_thread_binding()] = 3.0

    with pytest.raises(tilelang.CompileError, match="2 T.Kernel scopes with statements between or after them"):
        tilelang.compile(mixed)


def test_the_pipeline_splits_the_program_first_then_runs_its_phases_on_each_kernel():
    from tilelang_musa.ir.pass_config import PassConfigKey
    from tilelang_musa.target import determine_target
    from tilelang_musa.transform.pipeline import lower_program, lowering_passes, lowering_phases

    phases = lowering_phases({})
    assert [p.name for p in phases] == ["Legalize", "Pipeline", "LowerTileOps", "LowerMemory", "Flatten",
                                        "Synchronize", "Finalize"]
    assert [p.info.name for p in lowering_passes({})] == [p.info.name for ph in phases for p in ph.passes]
    without_sync = lowering_phases({PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True})
    assert "tl.ThreadSync.shared" not in [p.info.name for p in without_sync[5].passes]
    seen = []
    funcs = lower_program(add_then_reverse(), determine_target("musa -arch=mp_31"), {},
                          on_kernel=lambda index, count: seen.append((index, count)))
    assert seen == [(0, 2), (1, 2)] and len(funcs) == 2
    assert all("tl.dynamic_smem_bytes" in f.attrs for f in funcs)  # each went through Finalize
