"""T.disable_warp_group_reg_alloc() / T.no_set_max_nreg() ask that registers not move between warp groups: MUSA
never moves them, so both are accepted, print nothing and leave the kernel as it was; the calls that ask for a
reallocation stay errors naming the construct and the line."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand


def scale_program(N, opt_out):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(N // 128, threads=128) as bx:
            if opt_out == "disable":
                T.disable_warp_group_reg_alloc()
            elif opt_out == "no_set":
                T.no_set_max_nreg()
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * 2.0

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("opt_out", ["disable", "no_set"])
def test_register_realloc_opt_out_is_a_no_op(arch, opt_out):
    target = f"musa -arch={arch}"
    kernel = tilelang.compile(scale_program(512, opt_out), target=target)
    plain = tilelang.compile(scale_program(512, None), target=target)
    assert kernel.get_kernel_source() == plain.get_kernel_source()
    assert "nreg" not in kernel.get_kernel_source()
    a, b = rand((512,), torch.float32), poison((512,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a * 2)


def test_register_realloc_opt_out_outside_kernel_is_an_error():
    with pytest.raises(tilelang.CompileError, match="T.no_set_max_nreg.*inside `with T.Kernel") as info:
        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            T.no_set_max_nreg()

    assert "T.no_set_max_nreg()" in str(info.value)


@pytest.mark.parametrize("name", ["set_max_nreg", "inc_max_nreg", "dec_max_nreg"])
def test_register_reallocation_requests_stay_rejected(name):
    with pytest.raises(tilelang.UnsupportedError, match=rf"T.{name} \(register reallocation") as info:
        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=128):
                getattr(T, name)(240)

    assert "getattr(T, name)(240)" in str(info.value)
