"""`A[i, j:j + n] = B[k, l:l + n]` (a region of one constant-length dimension stored into a slice of the same
length, directly or through a name) is one n-lane vector load and store."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand


def slice_store_program():
    @T.prim_func
    def main(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=16) as _:
            tx = T.get_thread_binding()
            row = A[tx, 0:4]
            B[tx, 4:8] = row
            B[tx, 0:4] = A[tx, 4:8]

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_region_stored_into_a_slice_is_a_vector_copy(arch):
    kernel = tilelang.compile(slice_store_program(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert source.count("reinterpret_cast<float4*>") >= 4, source
    a, b = rand((16, 16), torch.float32), poison((16, 16), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b[:, 4:8], a[:, 0:4])
    torch.testing.assert_close(b[:, 0:4], a[:, 4:8])
    assert torch.isnan(b[:, 8:]).all()
