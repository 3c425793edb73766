"""`T.copy(..., force_async_copy=True)` completes the copy (commit and wait) whatever TL_DISABLE_THREAD_STORAGE_SYNC
says. Moore Threads' port leaves the commit and wait out under that key (the user then owns the copy's completion);
upstream main's wait of an implicit cp.async copy does not depend on it, and a user who completes copies himself
writes `T.async_copy` and `T.ptx_wait_group` (docs/UPSTREAM_SCRIPT_COMPAT.md, row force_async_copy, says why)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand

ARCHS = ["mp_22", "mp_31"]
NO_SYNC = {tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True}


def copy_then_read_own_elements():
    @T.prim_func
    def own(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            S = T.alloc_shared((1024,), "float32")
            for v in T.vectorized(4):
                T.copy(A[tx * 4 + v], S[tx * 4 + v], force_async_copy=True)  # each thread its own 16 bytes
            for v in T.serial(4):
                B[tx * 4 + v] = S[tx * 4 + v] + 1.0  # read back by the thread that copied them: no barrier needed

    return own


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("configs", [{}, NO_SYNC], ids=["default", "no_storage_sync"])
def test_a_forced_async_copy_waits_for_its_data_under_any_key(arch, configs):
    kernel = tilelang.compile(copy_then_read_own_elements(), target=f"musa -arch={arch}", pass_configs=configs)
    source = kernel.get_kernel_source()
    assert "tl::cp_async_gs" in source and "tl::cp_async_wait<0>();" in source
    if configs:  # the key is honoured for the rest: the block of 256 threads gets no barrier of the compiler's
        assert "__syncthreads()" not in source
    a = rand((1024,), torch.float32)
    b = torch.full((1024,), float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, a + 1.0)
