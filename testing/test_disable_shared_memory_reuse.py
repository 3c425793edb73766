"""TL_DISABLE_SHARED_MEMORY_REUSE: every shared tile has its own bytes of the dynamic arena. By default two tiles
whose lifetimes do not overlap share bytes (PlanDynamicSharedMemory); with the option they do not, and the values
are the same. (Moore Threads' transform/disable_memory_reuse asks for this; before, the option was accepted with a
warning that wrongly said tiles were never reused.)"""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

N = 1024


def _two_tiles_one_after_the_other():
    @T.prim_func
    def main(A: T.Tensor((N,), T.float16), B: T.Tensor((N,), T.float16), A_out: T.Tensor((N,), T.float16),
             B_out: T.Tensor((N,), T.float16)):
        with T.Kernel(1, threads=128):
            a_shared = T.alloc_shared((N,), T.float16)
            T.copy(A, a_shared)
            T.copy(a_shared, A_out)
            b_shared = T.alloc_shared((N,), T.float16)
            T.copy(B, b_shared)
            T.copy(b_shared, B_out)

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("disable_reuse", [False, True])
def test_tiles_with_disjoint_lifetimes_share_bytes_unless_reuse_is_disabled(arch, disable_reuse):
    kernel = tilelang.compile(_two_tiles_one_after_the_other(), target=f"musa -arch={arch}",
                              pass_configs={"tl.disable_shared_memory_reuse": disable_reuse})
    source = kernel.get_kernel_source()
    assert "half_t* a_shared = reinterpret_cast<half_t*>(buf_dyn_shmem);" in source
    b_offset = "(buf_dyn_shmem + 2048)" if disable_reuse else "(buf_dyn_shmem)"
    assert f"half_t* b_shared = reinterpret_cast<half_t*>{b_offset};" in source
    a, b = rand((N,), torch.float16, seed=31), rand((N,), torch.float16, seed=32)
    a_out, b_out = poison((N,), torch.float16), poison((N,), torch.float16)
    kernel(a, b, a_out, b_out)
    torch.testing.assert_close(a_out, a, rtol=0, atol=0)
    torch.testing.assert_close(b_out, b, rtol=0, atol=0)
