"""A buffer slice with a step other than 1 (`A[0:10:2]`, in a load or a store) is a SliceStepError (a RuntimeError
too, as upstream's frontend raises it; Moore Threads' frontend_v2 test catches that) naming the slice and the
line, where TVM's own check used to surface as a bare ValueError. Python sequences keep stepped slices, and a
step of 1 is a plain slice."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.errors import SliceStepError


def test_stepped_buffer_load_is_named_at_the_line():
    with pytest.raises(RuntimeError, match=r"buffer slice `A\[0:10:2\]`: a step other than 1 is not supported") as info:
        @T.prim_func
        def main(A: T.Tensor((10,), T.int32), B: T.Tensor((5,), T.int32)):
            with T.Kernel(1):
                B[0:5] = A[0:10:2]
    assert isinstance(info.value, SliceStepError) and isinstance(info.value, tilelang.CompileError)
    assert "B[0:5] = A[0:10:2]" in str(info.value)


def test_stepped_buffer_store_is_named_at_the_line():
    with pytest.raises(SliceStepError, match=r"buffer slice `B\[0:5:2\]`") as info:
        @T.prim_func
        def main(A: T.Tensor((10,), T.int32), B: T.Tensor((5,), T.int32)):
            with T.Kernel(1):
                B[0:5:2] = A[0:3]
    assert "B[0:5:2] = A[0:3]" in str(info.value)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_python_lists_keep_stepped_slices_and_unit_steps_are_plain_slices(arch):
    @T.prim_func
    def main(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((128,), T.float32)
            T.copy(A[0:128:1], S)
            factors = [1.0, 2.0, 3.0, 4.0][::2]  # [1.0, 3.0]
            for i in T.Parallel(128):
                B[i] = S[i] * factors[1]

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "3.000000e+00f" in kernel.get_kernel_source()
    a, b = rand((128,), torch.float32, 5), poison((128,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a * 3.0)
