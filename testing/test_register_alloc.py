"""Register-allocation hints of NVIDIA warp-specialized code. T.disable_warp_group_reg_alloc() / T.no_set_max_nreg()
ask that registers not move between warp groups: MUSA never moves them, so both are accepted silently. The requests
for a reallocation (T.set_max_nreg, T.inc_max_nreg, T.dec_max_nreg, T.annotate_producer_reg_dealloc /
T.annotate_consumer_reg_alloc) have no MUSA instruction: accepted with a one-time warning. None of them changes the
printed kernel."""

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


def hinted_program(N):
    """A hand warp-specialized kernel as NVIDIA code writes it: the first warp group produces (and gives back
    registers), the second consumes (and asks for more)."""

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(N // 128, threads=256) as bx:
            T.annotate_producer_reg_dealloc(40)
            T.annotate_consumer_reg_alloc()
            tile = T.alloc_shared((128,), "float32")
            tx = T.get_thread_binding()
            if tx < 128:
                T.dec_max_nreg(24)
                tile[tx] = A[bx * 128 + tx] * 3.0
            else:
                T.inc_max_nreg(240)
                T.set_max_nreg(232, 1)
            T.sync_threads()
            if tx >= 128:
                B[bx * 128 + tx - 128] = tile[tx - 128] + 1.0

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_register_reallocation_requests_are_ignored_with_one_warning(arch, monkeypatch):
    from tilelang_musa import diagnostics

    monkeypatch.setattr(diagnostics, "_WARNED", set())
    with pytest.warns(tilelang.TileLangWarning) as caught:
        kernel = tilelang.compile(hinted_program(512), target=f"musa -arch={arch}")
    messages = [str(w.message) for w in caught if "register" in str(w.message)]
    for name in ("set_max_nreg", "inc_max_nreg", "dec_max_nreg", "annotate_producer_reg_dealloc",
                 "annotate_consumer_reg_alloc"):
        assert sum(f"T.{name}:" in m for m in messages) == 1, messages
    assert all("the hint is ignored" in m for m in messages)
    source = kernel.get_kernel_source()
    assert "nreg" not in source and "setmaxnreg" not in source
    a, b = rand((512,), torch.float32, 3), poison((512,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a * 3 + 1)


@pytest.mark.parametrize("call, message", [("T.set_max_nreg(240, 2)", "is_inc must be 0 or 1"),
                                           ("T.inc_max_nreg(-8)", "reg_count must be a positive Python int")])
def test_register_reallocation_requests_check_their_arguments(call, message):
    with pytest.raises(tilelang.CompileError, match=message):
        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=128):
                eval(call)
