"""A fragment that T.Parallel loops index past its declared shape takes the extents they walk, as upstream TileLang
lays fragments out from their loops (WidenWalkedFragments); where a tile op also covers it, that is an error."""

import re

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from conftest import poison, rand, without_locations
from tilelang_musa import diagnostics
from tilelang_musa.diagnostics import TileLangWarning
from tilelang_musa.errors import CompileError
from tilelang_musa.transform.widen_walked_fragments import widen_walked_fragments

M, N = 64, 32


def row_bias():
    @T.prim_func
    def f(X: T.Tensor((M, N), "float32"), Bias: T.Tensor((M,), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            bias = T.alloc_fragment((2,), "float32")  # declared too small: the loops below walk M rows
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(X, acc)
            for i in T.Parallel(M):
                bias[i] = Bias[i] * 2.0
            for i, j in T.Parallel(M, N):
                acc[i, j] = acc[i, j] + bias[i]
            T.copy(acc, Y)

    return f


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_fragment_walked_past_its_shape_is_widened_and_matches_torch(arch, monkeypatch):
    monkeypatch.setattr(diagnostics, "_WARNED", set())  # the warning is once per process; each arch checks it
    with pytest.warns(TileLangWarning, match=r"fragment `bias` is declared \(2,\).*laid out as \(64,\)"):
        kernel = tilelang.compile(row_bias(), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert re.search(r"float bias\w*\[\d+\];", src), src  # a register array of its own
    x, bias = rand((M, N), torch.float32, 1), rand((M,), torch.float32, 2)
    y = poison((M, N), torch.float32)
    kernel(x, bias, y)
    torch.testing.assert_close(y, x + 2.0 * bias[:, None])


def test_fragment_a_tile_op_covers_is_not_widened():
    @T.prim_func
    def f(X: T.Tensor((2, N), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((2, N), "float32")
            row_max = T.alloc_fragment((2,), "float32")
            T.copy(X, x)
            T.reduce_max(x, row_max, dim=1)
            for i in T.Parallel(M):
                Y[i] = row_max[i]

    with pytest.raises(CompileError, match=r"`row_max` is declared \(2,\) but this T.Parallel loop indexes it as "
                                           r"`row_max\[i\]`, up to \(63,\)") as err:
        tilelang.compile(f, target="musa -arch=mp_31")
    loop_line = next(n for n, text in enumerate(open(__file__), 1) if "Y[i] = row_max[i]" in text) - 1
    assert f"test_widen_walked_fragments.py:{loop_line}:" in str(err.value)


def test_widening_before_and_after(monkeypatch):
    """The pass alone: the fragment is redeclared with the extents its T.Parallel loops reach and every access goes to
    the new buffer; a dimension indexed by a variable of no T.Parallel loop (`k`, serial) keeps its extent."""
    @T.prim_func
    def before(X: T.Tensor((16, 8), "float32"), Y: T.Tensor((16, 8), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((4, 8), "float32")
            for k in T.serial(8):
                for i in T.Parallel(16):
                    f[i, k] = X[i, k] * 2.0
            for i, j in T.Parallel(16, 8):
                Y[i, j] = f[i, j]

    @T.prim_func
    def expected(X: T.Tensor((16, 8), "float32"), Y: T.Tensor((16, 8), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((16, 8), "float32")
            for k in T.serial(8):
                for i in T.Parallel(16):
                    f[i, k] = X[i, k] * 2.0
            for i, j in T.Parallel(16, 8):
                Y[i, j] = f[i, j]

    monkeypatch.setattr(diagnostics, "_WARNED", set())
    with pytest.warns(TileLangWarning, match=r"fragment `f` is declared \(4, 8\).*laid out as \(16, 8\)"):
        after = widen_walked_fragments(before)
    tvm.ir.assert_structural_equal(without_locations(after),
                                   without_locations(expected).with_attr("global_symbol", "before"))


def test_a_fragment_within_its_shape_is_unchanged():
    @T.prim_func
    def fits(X: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((16,), "float32")
            for i in T.Parallel(16):
                f[i] = X[i]
            for i in T.Parallel(8):
                X[i] = f[i + 8]

    assert widen_walked_fragments(fits).same_as(fits)
