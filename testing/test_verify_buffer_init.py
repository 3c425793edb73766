"""VerifyBufferInit (upstream main's check): a compile warns of shared, fragment and local buffers read before
anything writes them, once per kernel with every such buffer listed; TL_DISABLE_BUFFER_INIT_CHECK silences it.
It changes nothing: the kernels' source is the same with the check on or off."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand
from tilelang import tvm

ARCHS = ["mp_22", "mp_31"]
MESSAGE = "Buffer read before initialization"
OFF = {tilelang.PassConfigKey.TL_DISABLE_BUFFER_INIT_CHECK: True}


def gemm_kernel(init):
    @T.prim_func
    def main(A: T.Tensor((32, 32), "float16"), B: T.Tensor((32, 32), "float16"), C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((32, 32), "float16")
            b_s = T.alloc_shared((32, 32), "float16")
            c_f = T.alloc_fragment((32, 32), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            if init == "clear":
                T.clear(c_f)
            T.gemm(a_s, b_s, c_f, clear_accum=init == "clear_accum")
            T.copy(c_f, C)

    return main


def warnings_of(func, capfd, configs=None):
    with tvm.transform.PassContext(config=configs or {}):
        tilelang.transform.VerifyBufferInit()(tvm.IRModule.from_expr(func))
    return capfd.readouterr().err


@pytest.fixture
def uncached():
    was = tilelang.is_cache_enabled()
    tilelang.disable_cache()
    yield
    if was:
        tilelang.enable_cache()


@pytest.mark.parametrize("arch", ARCHS)
def test_a_compile_warns_of_an_accumulator_nobody_cleared(arch, capfd, uncached):
    target = f"musa -arch={arch}"
    warned = tilelang.compile(gemm_kernel("none"), target=target).get_kernel_source()
    err = capfd.readouterr().err
    assert f"{MESSAGE} in `main`: 1 buffer(s)" in err and "`c_f` is read before anything writes it" in err
    assert "clear_accum=True" in err and "test_verify_buffer_init.py:" in err
    silenced = tilelang.compile(gemm_kernel("none"), target=target, pass_configs=OFF).get_kernel_source()
    assert MESSAGE not in capfd.readouterr().err
    assert warned == silenced  # a warning only

    kernel = tilelang.compile(gemm_kernel("clear"), target=target)
    assert MESSAGE not in capfd.readouterr().err
    a, b = rand((32, 32), torch.float16, 1), rand((32, 32), torch.float16, 2)
    c = torch.full((32, 32), float("nan"))
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("init", ["clear", "clear_accum"])
def test_an_initialized_accumulator_is_not_reported(init, capfd):
    assert MESSAGE not in warnings_of(gemm_kernel(init), capfd)


def test_the_pass_honours_the_enclosing_pass_context(capfd):
    assert MESSAGE in warnings_of(gemm_kernel("none"), capfd)
    assert MESSAGE not in warnings_of(gemm_kernel("none"), capfd, OFF)


def test_the_run_time_clear_of_the_k_loop_is_a_write(capfd):
    """`clear_accum=(k == 0)` clears C under the condition before the gemm: C is written."""
    @T.prim_func
    def main(A: T.Tensor((32, 64), "float16"), B: T.Tensor((64, 32), "float16"), C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((32, 32), "float16")
            b_s = T.alloc_shared((32, 32), "float16")
            c_f = T.alloc_fragment((32, 32), "float32")
            for k in T.Pipelined(2, num_stages=1):
                T.copy(A[0, k * 32], a_s)
                T.copy(B[k * 32, 0], b_s)
                T.gemm(a_s, b_s, c_f, clear_accum=(k == 0))
            T.copy(c_f, C)

    assert MESSAGE not in warnings_of(main, capfd)


def test_every_buffer_once_in_one_warning(capfd):
    @T.prim_func
    def main(C: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=64):
            s = T.alloc_shared((16,), "float32")
            t = T.alloc_shared((16,), "float32")
            for i in T.Parallel(16):
                C[i] = s[i] + t[i] + s[(i + 1) % 16]

    err = warnings_of(main, capfd)
    assert err.count(MESSAGE) == 1 and "2 buffer(s)" in err
    assert "[1] `s`" in err and "[2] `t`" in err and "[3]" not in err and "clear_accum" not in err


def test_shared_memory_a_later_branch_writes_is_not_reported(capfd):
    """A producer branch after its consumer (warp specialization): barriers order them, not the source."""
    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), C: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((16,), "float32")
            tx = T.get_thread_binding()
            if tx < 64:
                for i in T.Parallel(16):
                    C[i] = s[i]
            else:
                T.copy(A, s)

    assert MESSAGE not in warnings_of(main, capfd)


def test_per_thread_storage_follows_the_source_order(capfd):
    """A fragment written only after its read, and a store that reads its own destination, are reported."""
    @T.prim_func
    def late(C: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=64):
            f = T.alloc_fragment((16,), "float32")
            for i in T.Parallel(16):
                C[i] = f[i]
            T.clear(f)

    @T.prim_func
    def carried(A: T.Tensor((16,), "int32"), C: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=64):
            idx = T.alloc_local((1,), "int32")
            for i in T.serial(16):
                idx[0] = T.if_then_else(A[i] > 0, i, idx[0])
            C[0] = idx[0]

    assert "`f` is read" in warnings_of(late, capfd)
    assert "`idx` is read" in warnings_of(carried, capfd)


def test_an_address_given_to_a_call_counts_as_written(capfd):
    @T.prim_func
    def main(C: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=64):
            s = T.alloc_shared((16,), "float32")
            T.call_extern("handle", "fill_it", T.address_of(s[0]))
            for i in T.Parallel(16):
                C[i] = s[i]

    assert MESSAGE not in warnings_of(main, capfd)


def test_a_view_written_is_its_buffer_written(capfd):
    @T.prim_func
    def main(A: T.Tensor((4, 16), "float32"), C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            s = T.alloc_shared((64,), "float32")
            s2 = T.view(s, (4, 16))
            T.copy(A, s2)
            for i in T.Parallel(64):
                C[i] = s[i]

    assert MESSAGE not in warnings_of(main, capfd)


def test_a_var_starts_at_zero_and_is_not_reported(capfd):
    """`T.alloc_var` without an initializer is 0 (docs/UPSTREAM_SCRIPT_COMPAT.md), so reading it first is defined;
    the local tile beside it is reported (upstream's issue 1678 kernel)."""
    @T.prim_func
    def main(O: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=1):
            tmp_row = T.alloc_local((4,), "float32")
            amax = T.alloc_var("float32")
            amax = T.max(amax, tmp_row[0])
            O[0] = amax

    err = warnings_of(main, capfd)
    assert "1 buffer(s)" in err and "`tmp_row` is read" in err and "amax" not in err
