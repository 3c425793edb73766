"""Names that libraries built on older TileLang releases import (BitBLAS's TileLang templates): the module pass
`tilelang.transform.Simplify(simplify_arguments=False)`, applied as `Simplify()(IRModule)`, and the module
`tilelang.intrinsics.utils` (`get_mma_micro_size`, the swizzle helpers, `index_to_coordinates`), and upstream's flat-index
helpers `T.index_to_coordinates` / `tilelang.language.utils.linear_index`."""

import pytest
import torch
import tvm
from tvm import tirx

import tilelang
import tilelang.language as T
from conftest import poison, rand

MP31, MP22 = "musa -arch=mp_31", "musa -arch=mp_22"


def _scaled_copy():
    @T.prim_func
    def scaled(x: T.Tensor((64,), "float32"), unused: T.Tensor((64,), "float32"), y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding(0)
            y[tx * 4 // 4] = x[tx] * T.float32(3)

    return scaled


def _only_function(mod):
    (func,) = mod.functions.values()
    return func


def test_simplify_is_a_module_pass_that_folds_and_keeps_the_parameters():
    simplify = tilelang.transform.Simplify()
    assert isinstance(simplify, tvm.transform.Pass)
    func = _only_function(simplify(tvm.IRModule.from_expr(_scaled_copy())))
    assert isinstance(func, tirx.PrimFunc)
    assert [p.name for p in func.params] == ["x", "unused", "y"]
    assert "tx * 4 // 4" not in func.script()


def test_simplify_arguments_drops_the_unused_tensor():
    func = _only_function(tilelang.transform.Simplify(simplify_arguments=True)(tvm.IRModule.from_expr(_scaled_copy())))
    assert [p.name for p in func.params] == ["x", "y"]


@pytest.mark.parametrize("target", [MP31, MP22])
def test_a_program_through_simplify_compiles_and_runs(target):
    func = _only_function(tilelang.transform.Simplify()(tvm.IRModule.from_expr(_scaled_copy())))
    kernel = tilelang.compile(func, target=target)
    source = kernel.get_kernel_source()
    assert "y[(int)threadIdx.x] = x[(int)threadIdx.x] * 3.000000e+00f;" in source and "unused" in source
    x, unused, y = rand((64,), torch.float32, 1), rand((64,), torch.float32, 2), poison((64,), torch.float32)
    kernel(x, unused, y)
    torch.testing.assert_close(y, x * 3)


def test_mma_micro_size_by_input_width():
    from tilelang.intrinsics.utils import get_mma_micro_size

    assert get_mma_micro_size("float16") == (16, 16, 16)
    assert get_mma_micro_size("bfloat16") == (16, 16, 16)
    assert get_mma_micro_size("int8") == (16, 16, 32)
    assert get_mma_micro_size("float8_e4m3") == (16, 16, 32)


def test_swizzle_layout_from_intrinsics_utils_is_the_portable_one():
    """BitBLAS imports it from tilelang.intrinsics.utils: the same function as tilelang.intrinsics', whose kernels
    test_upstream_modules.py runs on both archs."""
    from tilelang.intrinsics import make_mma_swizzle_layout as portable
    from tilelang.intrinsics.utils import make_mma_swizzle_layout

    assert make_mma_swizzle_layout is portable


def test_flat_index_helpers_invert_each_other():
    from tilelang.language.utils import index_to_coordinates, linear_index

    assert index_to_coordinates(37, (4, 8)) == [0, 5] and index_to_coordinates(77, (3, 5, 7)) == [2, 1, 0]
    assert linear_index(2, 1, 0, 5, 7) == 77 and linear_index(9) == 9
    with pytest.raises(ValueError, match="2 coordinate"):
        linear_index(1, 2, 3, 4)
    with pytest.raises(ValueError, match="no dimensions"):
        index_to_coordinates(3, ())


@pytest.mark.parametrize("target", [MP31, MP22])
def test_index_to_coordinates_walks_a_tile_by_one_flat_counter(target):
    from tilelang.intrinsics.utils import index_to_coordinates as from_intrinsics

    assert from_intrinsics is T.index_to_coordinates
    threads, vec = 64, 8

    @T.prim_func
    def doubled(a: T.Tensor((32, 64), "float16"), b: T.Tensor((32, 64), "float16")):
        with T.Kernel(1, threads=threads):
            tx = T.get_thread_binding(0)
            tile = T.alloc_shared((32, 64), "float16")
            T.copy(a, tile)
            for i in T.serial(32 * 64 // (threads * vec)):
                for v in T.vectorized(vec):
                    vi, vj = T.index_to_coordinates(i * threads * vec + tx * vec + v, (32, 64))
                    b[vi, vj] = tile[vi, vj] * T.float16(2)

    kernel = tilelang.compile(doubled, target=target)
    # the coordinates fold back into one contiguous 8-element vector a thread (a vector load of the tile)
    assert "tile + ((i * 512) + (((int)threadIdx.x) * 8))" in kernel.get_kernel_source()
    a, b = rand((32, 64), torch.float16, 6), poison((32, 64), torch.float16)
    kernel(a, b)
    torch.testing.assert_close(b, a * 2)
