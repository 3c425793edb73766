"""CUDA built-ins that MUSA keeps, called by name with `T.call_extern` (as upstream scripts do): printed as written,
and defined by the simulator's device model."""

import pytest
import torch

import tilelang
import tilelang.language as T


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_nanosleep_before_a_warp_sync_publishes_the_store(arch):
    @T.prim_func
    def f(A: T.Tensor((1,), "int32"), B: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            if tx == 0:
                T.call_extern("void", "__nanosleep", 100)
                A[0] = -7
            T.sync_warp()
            if tx == 1:
                B[0] = A[0]

    kernel = tilelang.compile(f, target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "__nanosleep(100);" in src and "__syncwarp(" in src, src
    a, b = torch.zeros(1, dtype=torch.int32), torch.full((1,), 5, dtype=torch.int32)
    kernel(a, b)
    assert int(b[0]) == -7 and int(a[0]) == -7
