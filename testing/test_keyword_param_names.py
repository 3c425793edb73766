"""Kernel parameters named like C++ keywords (`do`, `new`, `this`: tile-ai/TileOPs' GDN backward takes a `do`
gradient): the device printer renames them through its name table, and the host wrapper, which declares the
program's parameters again, takes the same kind of C name (`do_arg`)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand


def scaled_sum(n_blocks: int, arch: str):
    @T.prim_func
    def main(do: T.Tensor((n_blocks * 64,), "float32"), new: T.Tensor((n_blocks * 64,), "float32"),
             out: T.Tensor((n_blocks * 64,), "float32"), this: T.int32):
        with T.Kernel(T.ceildiv(this, 64), threads=64) as bx:
            for i in T.Parallel(64):
                out[bx * 64 + i] = do[bx * 64 + i] * 2.0 + new[bx * 64 + i]

    return tilelang.compile(main, target=f"musa -arch={arch}")


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_parameters_named_like_cxx_keywords(arch):
    kernel = scaled_sum(3, arch)
    host = kernel.get_host_source()
    assert "float* do_arg, float* new_arg, float* out, int this_arg, musaStream_t stream" in host
    assert "(long long)this_arg" in host  # the grid's size expression names the renamed scalar
    device = kernel.get_kernel_source()
    assert "do_1" in device and "new_1" in device and " do[" not in device
    do, new = rand((192,), torch.float32, 1), rand((192,), torch.float32, 2)
    out = torch.full((192,), float("nan"))
    kernel(do, new, out, 192)
    torch.testing.assert_close(out, do * 2.0 + new)


def test_two_parameters_that_would_share_a_c_name_are_an_error():
    @T.prim_func
    def main(do: T.Tensor((64,), "float32"), do_arg: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                do_arg[i] = do[i]

    with pytest.raises(tilelang.CompileError, match="`do` and `do_arg` would both be `do_arg`"):
        tilelang.compile(main, target="musa -arch=mp_31")
