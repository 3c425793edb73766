"""Names real TileLang scripts use: `tilelang.set_log_level` (upstream's logger), `tilelang.par_compile` at module
level, `T.Select` with Python bools (`T.Select(True, False, True)` in upstream's tests), the NVIDIA instruction
emitters of `tilelang.cuda.intrinsics.macro` (a named error), and what hand warp-specialized kernels call besides
register hints: `T.wgmma_gemm` (an asynchronous T.gemm); `T.ptx_cp_async` is tested in test_ptx_cp_async.py."""

import logging

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

ARCHS = ["mp_31", "mp_22"]


@pytest.fixture
def tilelang_logger():
    """The package's logger, with what other code in this process may have switched off (a global
    `logging.disable`, a logging config that disables existing loggers) switched on for the test, and restored."""
    logger = logging.getLogger("tilelang")
    level, disabled, disable_all = logger.level, logger.disabled, logging.root.manager.disable
    logger.disabled = False
    logging.disable(logging.NOTSET)
    yield logger
    logger.setLevel(level)
    logger.disabled = disabled
    logging.disable(disable_all)


def test_set_log_level_takes_names_and_numbers_as_upstream(tilelang_logger):
    tilelang.set_log_level("warning")
    assert tilelang_logger.level == logging.WARNING
    tilelang.set_log_level(logging.DEBUG)
    assert tilelang_logger.level == logging.DEBUG
    tilelang.set_log_level("not-a-level")  # upstream falls back to INFO
    assert tilelang_logger.level == logging.INFO


def test_the_logger_has_one_upstream_style_handler_and_does_not_propagate(tmp_path):
    """In a fresh interpreter: the suite's other tests (in-process pytest runs, Ray) may reconfigure logging."""
    import subprocess
    import sys

    code = ("import logging, importlib, tilelang; from tilelang_musa import log; log.install_handler(); "
            "lg = logging.getLogger('tilelang'); assert len(lg.handlers) == 1 and not lg.propagate, lg.handlers; "
            "tilelang.set_log_level('INFO'); lg.info('hello from a kernel file'); lg.debug('not shown at INFO'); "
            "assert importlib.import_module('tilelang').set_log_level is log.set_log_level")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={**__import__("os").environ, "PYTHONPATH": str(__import__("pathlib").Path(
                              tilelang.__file__).resolve().parents[1])})
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    assert "[TileLang:tilelang:INFO]" in err and "hello from a kernel file" in err and "not shown" not in err, err


def _scale(N, factor):
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            B[tx] = A[tx] * factor

    return main


def test_par_compile_at_module_level_returns_kernels_in_order():
    kernels = tilelang.par_compile([_scale(64, 2.0), _scale(64, 3.0)], num_workers=1,
                                   target="musa -arch=mp_31")
    a = rand((64,), torch.float32, seed=5)
    for kernel, factor in zip(kernels, (2.0, 3.0)):
        b = poison((64,), torch.float32)
        kernel(a, b)
        torch.testing.assert_close(b, a * factor)


@pytest.mark.parametrize("arch", ARCHS)
def test_select_takes_python_bools(arch):
    N = 128

    @T.prim_func
    def main(A: T.Tensor((N, 4), T.float32), B: T.Tensor((N, 4), T.float32)):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            B[tx, 0] = T.Select(True, A[tx, 0], 0.0)
            B[tx, 1] = T.Select(False, 1.0, A[tx, 1])
            B[tx, 2] = T.Select(T.Select(True, False, True), 1.0, A[tx, 2])
            B[tx, 3] = T.if_then_else(T.Select(A[tx, 3] > 0, True, False), A[tx, 3], -A[tx, 3])

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    a, b = rand((N, 4), torch.float32, seed=6), poison((N, 4), torch.float32)
    kernel(a, b)
    expected = a.clone()
    expected[:, 3] = a[:, 3].abs()
    torch.testing.assert_close(b, expected)


def test_nvidia_instruction_emitters_import_and_name_what_to_write_instead():
    from tilelang.cuda.intrinsics.macro.mma_macro_generator import (TensorCoreIntrinEmitter,
                                                                    TensorCoreIntrinEmitterWithLadderTransform)

    for emitter in (TensorCoreIntrinEmitter, TensorCoreIntrinEmitterWithLadderTransform):
        with pytest.raises(tilelang.UnsupportedError, match=rf"macro.{emitter.__name__} emits .* write the tile "
                           r"product as T.gemm"):
            emitter(a_dtype="float16", b_dtype="float16", accum_dtype="float32")


@pytest.mark.parametrize("arch", ARCHS)
def test_wgmma_gemm_issues_without_waiting_then_wait_wgmma_completes_it(arch):
    """Upstream's explicit asynchronous GEMM of hand warp-specialized kernels: T.gemm(..., wg_wait=-1). On mp_31 the
    SQMMA is issued without a wait and T.wait_wgmma completes it; on mp_22 the gemm is synchronous."""
    M, N, K = 128, 128, 64

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((N, K), "float16")
            C_f = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(C_f)
            T.wgmma_gemm(A_s, B_s, C_f, transpose_B=True)
            T.wait_wgmma(0)
            T.copy(C_f, C)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    if arch == "mp_31":
        assert "_sqmma_swizzled_nowait<" in src and "tl::sqmma_wait<0>()" in src
    else:
        assert "sqmma_wait" not in src and "_nowait<" not in src
    a, b = rand((M, K), torch.float16, 23), rand((N, K), torch.float16, 24)
    c = poison((M, N), torch.float32)
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float().T, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch", ARCHS)
def test_call_extern_family_takes_dtype_as_a_keyword(arch):
    """Upstream's T.call_extern / T.call_pure_extern / T.call_intrin move a `dtype=` keyword in front of the
    function name (`T.call_extern(func_name, *args, dtype=in_dtype)` in the dequantize examples)."""
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32"), C: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            x = T.call_pure_extern("expf", A[tx], dtype="float32")
            y = T.call_extern("fmaxf", x, B[tx], dtype=T.float32)
            C[tx] = T.call_intrin("tirx.fabs", y - 4.0, dtype="float32") + T.call_extern("float32", "fminf", x, 1.0)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "expf(A[" in src and "fmaxf(" in src and "fminf(" in src, src
    a, b, c = rand((128,), torch.float32), rand((128,), torch.float32, seed=1), poison((128,), torch.float32)
    kernel(a, b, c)
    x = torch.exp(a)
    torch.testing.assert_close(c, (torch.maximum(x, b) - 4.0).abs() + torch.minimum(x, torch.ones(1)))


def test_call_extern_without_a_dtype_says_what_it_needs():
    with pytest.raises(TypeError, match=r"T.call_extern\(dtype, name, \*args\).*got 1 argument"):
        T.call_extern("fmaxf")
