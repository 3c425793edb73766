"""`annotations=` on T.reduce_*: upstream's other spelling of batch= and nan_propagate=; any other key is rejected."""

import pytest
import torch

import tilelang
import tilelang.language as T

from conftest import poison, rand


def row_max(annotations):
    @T.prim_func
    def main(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32):  # each thread holds results of several rows
            x = T.alloc_fragment((64, 64), "float32")
            y = T.alloc_fragment((64,), "float32")
            T.copy(X, x)
            T.reduce_max(x, y, dim=1, annotations=annotations)
            T.copy(y, Y)

    return main


@pytest.mark.parametrize("arch", ["mp_22", "mp_31"])
def test_batch_and_nan_propagate_as_annotations_take_effect(arch):
    kernel = tilelang.compile(row_max({"batch": 2, "nan_propagate": True}), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl::BatchAllReduce<tl::MaxOpNan," in source and ", 2, " in source
    x, y = rand((64, 64), torch.float32, 5), poison((64,), torch.float32)
    x[3, 17] = float("nan")
    kernel(x, y)
    torch.testing.assert_close(y, x.amax(1), equal_nan=True)
    assert torch.isnan(y[3])


def test_an_annotation_without_an_effect_is_rejected():
    with pytest.raises(tilelang.CompileError, match=r"T.reduce_max: annotation 'swizzle' has no effect here"):
        row_max({"swizzle": 1})


def run_time_clear_program():
    @T.prim_func
    def main(X: T.Tensor((4, 64, 64), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            x = T.alloc_fragment((64, 64), "float32")
            y = T.alloc_fragment((64,), "float32")
            for k in T.serial(4):
                T.copy(X[k, :, :], x)
                T.reduce_sum(x, y, dim=1, clear=(k == 0))
            T.copy(y, Y)

    return main


def test_a_run_time_clear_is_rejected_not_read_as_false():
    # Python's bool() of `k == 0` is False: the reduction would have accumulated on every step, silently.
    with pytest.raises(tilelang.CompileError, match=r"T.reduce_sum: clear must be known when the kernel is traced"):
        run_time_clear_program()
