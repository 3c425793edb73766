"""Every option the language accepts has an effect, or a one-time TileLangWarning that says why it cannot apply
on MUSA yet: `coalesced_width` caps the width of the copy's accesses; `producer_threads`, the cache policies of
T.copy and pass-config keys whose subject does not exist yet warn."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa import diagnostics


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(diagnostics, "_WARNED", set())


def staged_copy(coalesced_width=None, parallel_width=None):
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((64, 64), "float32")
            T.copy(A, S, coalesced_width=coalesced_width)
            for i, j in T.Parallel(64, 64, coalesced_width=parallel_width):
                B[i, j] = S[i, j] + 1.0

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("copy_width,loop_width,widths", [(None, None, {"4"}), (2, None, {"2", "4"}),
                                                          (2, 1, {"2"}), (1, 1, set())])
def test_coalesced_width_caps_the_accesses(arch, copy_width, loop_width, widths):
    kernel = tilelang.compile(staged_copy(copy_width, loop_width), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert set(re.findall(r"reinterpret_cast<float(\d+)\*>", source)) == widths, source
    a = rand((64, 64), torch.float32, 41)
    b = poison((64, 64), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a + 1.0)


def test_coalesced_width_must_be_a_positive_int():
    with pytest.raises(tilelang.CompileError, match="coalesced_width=0 must be a positive int"):
        staged_copy(coalesced_width=0)


def test_producer_threads_warns_once_that_it_has_no_effect():
    with pytest.warns(tilelang.TileLangWarning, match=r"producer_threads=\.\.\.\) has no effect"):
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=256, producer_threads=128) as bx:
                A[T.get_thread_binding() % 128] = 1.0


def test_copy_cache_policy_warns_that_it_needs_tme():
    with pytest.warns(tilelang.TileLangWarning, match="cache hints of TME copies"):  # a copy into registers
        @T.prim_func
        def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                F = T.alloc_fragment((128,), "float32")
                T.copy(A, F, inner_cache_policy="cache_once")
                T.copy(F, B)


@pytest.mark.parametrize("key", ["TL_ENABLE_AUTO_WARP_SPECIALIZATION", "TL_DISABLE_VECTORIZE_256"])
def test_pass_configs_without_a_subject_warn(key, recwarn):
    from tilelang_musa.transform import normalize_pass_configs

    normalize_pass_configs({getattr(tilelang.PassConfigKey, key): True})
    normalize_pass_configs({getattr(tilelang.PassConfigKey, key): True})
    messages = [str(w.message) for w in recwarn if issubclass(w.category, tilelang.TileLangWarning)]
    assert len(messages) == 1 and key in messages[0] and "has no effect" in messages[0]
    normalize_pass_configs({tilelang.PassConfigKey.TL_DISABLE_SQMMA: True})  # has an effect: no warning
    assert len([w for w in recwarn if issubclass(w.category, tilelang.TileLangWarning)]) == 1
