"""Names upstream TileLang 0.1.13 scripts use: T.align_up, T.annotate_l2_hit_ratio, Layout.get_linearized_forward_index,
tilelang.jit.diagnostics."""

import logging
import warnings

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.layout import Layout

from conftest import poison, rand


@pytest.mark.parametrize("arch", ["mp_22", "mp_31"])
def test_align_up_rounds_a_runtime_size_up_to_a_multiple(arch):
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                if i < A.shape[0]:
                    B[i] = T.align_up(A.shape[0] * (i + 1), 16)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    n = 13
    a, b = rand((n,), torch.float32, 1), torch.full((n,), -1, dtype=torch.int32)
    kernel(a, b)
    assert b.tolist() == [-(-n * (i + 1) // 16) * 16 for i in range(n)]
    assert T.align_up(100, 16) == 112


@pytest.mark.parametrize("arch", ["mp_22", "mp_31"])
def test_l2_hit_ratio_is_checked_then_warns_once_it_has_no_effect(arch):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        T.annotate_l2_hit_ratio({A: 0.75})
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                B[i] = A[i] * 2.0

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    a, b = rand((64,), torch.float32, 2), poison((64,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a * 2)

    with pytest.raises(tilelang.CompileError, match=r"the ratio for `A` must be a number in \[0, 1\]; got 1.5"):
        @T.prim_func
        def bad(A: T.Tensor((64,), "float32")):
            T.annotate_l2_hit_ratio({A: 1.5})
            with T.Kernel(1, threads=64):
                A[0] = 1.0


def test_l2_hit_ratio_warning_names_the_lack_of_effect():
    from tilelang_musa import diagnostics

    diagnostics._WARNED.discard("annotate_l2_hit_ratio")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        @T.prim_func
        def main(A: T.Tensor((8,), "float32")):
            T.annotate_l2_hit_ratio({A: 0.5})
            with T.Kernel(1, threads=8):
                A[0] = 1.0

    assert any("T.annotate_l2_hit_ratio has no effect on MUSA" in str(w.message) for w in caught)


@pytest.mark.parametrize("layout,linear", [
    (Layout([2, 3, 4], lambda i, j, k: [i, j, k]), Layout([2, 3, 4], lambda i, j, k: i * 12 + j * 4 + k)),
    (Layout([64], lambda i: [i // 32, i % 32]), Layout([64], lambda i: i)),
    (Layout([2, 32], lambda i, j: [j, i]), Layout([2, 32], lambda i, j: j * 2 + i)),
])
def test_linearized_forward_index_is_the_row_major_offset_in_the_output_shape(layout, linear):
    from tilelang_musa.layout._expr import evaluate

    grid = np.indices([int(e) for e in layout.input_size])
    got = evaluate(layout.get_linearized_forward_index(), dict(zip(layout.get_forward_vars(), grid)))
    want = evaluate(linear.get_linearized_forward_index(), dict(zip(linear.get_forward_vars(), grid)))
    assert np.array_equal(np.broadcast_to(got, grid.shape[1:]), np.broadcast_to(want, grid.shape[1:]))
    # Upstream's accessors speak of shared input placeholders: two layouts' indices compare symbolically.
    import tvm

    assert [v.same_as(w) for v, w in zip(layout.get_forward_vars(), linear.get_forward_vars())] == [True] * layout.input_dim
    assert tvm.sym.Analyzer().can_prove_equal(layout.get_linearized_forward_index(), linear.get_linearized_forward_index())
    assert not tvm.sym.Analyzer().can_prove_equal(layout.get_linearized_forward_index(),
                                                  linear.get_linearized_forward_index() + 1)


def test_jit_diagnostics_log_each_compile_stage(caplog, monkeypatch):
    monkeypatch.setattr(__import__("logging").getLogger("tilelang"), "propagate", True)  # set_log_level stops propagation, as upstream
    from tilelang.jit.diagnostics import jit_phase

    caplog.set_level(logging.INFO, logger="tilelang.jit.diagnostics")
    with pytest.raises(ValueError, match="boom"), jit_phase("unit.failure", enabled=True, backend="sim"):
        raise ValueError("boom")
    assert any("TileLang JIT phase failed: unit.failure" in r.getMessage() and "backend='sim'" in r.getMessage()
               for r in caplog.records)
    caplog.clear()
    with jit_phase("unit.silent", enabled=False):
        pass
    assert not caplog.records

    monkeypatch.setenv("TILELANG_JIT_DIAGNOSTICS", "1")

    @T.prim_func
    def main(A: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=8):
            A[T.get_thread_binding()] = 3.0

    tilelang.compile(main, target="musa -arch=mp_31")
    messages = [r.getMessage() for r in caplog.records]
    for stage in ("tir", "lowered", "mu", "host", "bin"):
        assert any(f"TileLang JIT phase done: compile.{stage}" in m for m in messages), messages


@pytest.mark.parametrize("arch", ["mp_22", "mp_31"])
def test_assume_before_the_kernel_states_a_fact_about_the_parameters(arch):
    """Upstream issue 2883's program: `T.assume(stride % 2 == 0)` in the prim_func body, before `with T.Kernel`."""
    stride = T.dynamic("stride")

    @T.prim_func
    def main(dst: T.StridedTensor((1, 512), (stride, 1), "uint8"), src: T.StridedTensor((1, 512), (stride, 1), "uint8")):
        T.assume(stride % 2 == 0)
        with T.Kernel(1, threads=128):
            for token, feature in T.Parallel(4, 512):
                if token < 1:
                    dst[token, feature] = src[token, feature]

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    src = torch.randint(0, 255, (1, 512), generator=torch.Generator().manual_seed(5), dtype=torch.uint8)
    dst = torch.zeros((1, 512), dtype=torch.uint8)
    kernel(dst, src)
    assert torch.equal(dst, src)
