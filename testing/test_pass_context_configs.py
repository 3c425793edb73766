"""Pass configs given through TVM's PassContext, as upstream's and Moore Threads' tests give them:
`with tvm.transform.PassContext(config={"tl.disable_tma_lower": True}): tilelang.lower(...)`. Upstream registers its
`tl.*` keys with TVM; here the context keeps them aside for tilelang.compile / tilelang.lower, which read the innermost
entered context's under their own pass_configs (tilelang_musa/_wheel_patches.py, keep_tilelang_configs)."""

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from conftest import poison, rand


def _tme_copy():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float32), B: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 64), T.float32)
            T.copy(A, S)
            T.copy(S, B)

    return main


def _scale():
    @T.prim_func
    def main(A: T.Tensor((256,), T.float32), B: T.Tensor((256,), T.float32)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(256):
                B[i] = A[i] * 2.0

    return main


def test_a_tilelang_key_in_a_pass_context_reaches_tilelang_lower():
    target = "musa -arch=mp_31"
    assert "tl::tma_" in tilelang.lower(_tme_copy(), target=target).kernel_source
    with tvm.transform.PassContext(config={"tl.disable_tma_lower": True}):
        assert "tl::tma_" not in tilelang.lower(_tme_copy(), target=target).kernel_source
    with tvm.transform.PassContext(config={tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True}):
        assert "tl::tma_" not in tilelang.lower(_tme_copy(), target=target).kernel_source
    # left: the next lowering has its TME copy again
    assert "tl::tma_" in tilelang.lower(_tme_copy(), target=target).kernel_source


def test_the_innermost_context_and_then_the_callers_own_configs_win():
    target = "musa -arch=mp_31"
    with tvm.transform.PassContext(config={"tl.disable_tma_lower": True}):
        with tvm.transform.PassContext(config={"tl.disable_tma_lower": False}):
            assert "tl::tma_" in tilelang.lower(_tme_copy(), target=target).kernel_source
        with tvm.transform.PassContext():  # a context of its own, as in TVM: nothing inherited
            assert "tl::tma_" in tilelang.lower(_tme_copy(), target=target).kernel_source
        source = tilelang.lower(_tme_copy(), target=target, pass_configs={"tl.disable_tma_lower": False}).kernel_source
        assert "tl::tma_" in source


def test_tvm_keys_still_reach_tvm_and_unknown_keys_are_still_rejected():
    with tvm.transform.PassContext(config={"tirx.disable_vectorize": True, "tl.disable_tma_lower": True}):
        config = tvm.transform.PassContext.current().config
        assert bool(config["tirx.disable_vectorize"]) and "tl.disable_tma_lower" not in config
    with pytest.raises(AttributeError, match="tl.no_such_option"):
        tvm.transform.PassContext(config={"tl.no_such_option": True})


@pytest.mark.parametrize("arch", ["mp_22", "mp_31"])
def test_a_context_config_changes_a_compiled_kernel_and_it_runs(arch):
    target = f"musa -arch={arch}"
    vectorized = tilelang.compile(_scale(), target=target)
    with tvm.transform.PassContext(config={"tirx.disable_vectorize": True}):
        scalar = tilelang.compile(_scale(), target=target)
    assert "float4" in vectorized.get_kernel_source()
    assert "float4" not in scalar.get_kernel_source()
    for kernel in (vectorized, scalar):
        a, b = rand((256,), torch.float32, 7), poison((256,), torch.float32)
        kernel(a, b)
        torch.testing.assert_close(b, a * 2.0)


def test_a_jit_kernel_compiled_inside_a_pass_context_is_its_own_kernel():
    # @tilelang.jit remembers its kernels by their arguments; the entered context's tl.* configs select too, so a
    # kernel compiled under `with PassContext(config={...})` is not the one compiled outside it (and back)

    @tilelang.jit
    def fill(N, block):
        X = T.empty((N,), "float32")
        with T.Kernel(T.ceildiv(N, block), threads=block) as b:
            for i in T.Parallel(block):
                X[b * block + i] = 1.0
        return X

    outside = fill.compile(N=256, block=128)
    with tvm.transform.PassContext(config={"tl.disable_tma_lower": True}):
        inside = fill.compile(N=256, block=128)
        assert fill.compile(N=256, block=128) is inside
    assert inside is not outside and fill.compile(N=256, block=128) is outside
