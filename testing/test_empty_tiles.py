"""Tiles with a 0 in their shape (transform/remove_empty_tiles.py): a kernel written for a tail of some width keeps
its code when the width is 0 (SGLang's sparse decode attention over a KV cache with no rope tail). Copies, fills
and T.Parallel loops over the empty tile do nothing, a gemm over an empty K adds nothing (with clear_accum it
zeroes its accumulator), and any other use of the empty tile is an error naming it."""

import pytest
import tvm
import torch

import tilelang
import tilelang.language as T
from conftest import line_of, poison, rand

ARCHS = ["mp_31", "mp_22"]
H, D, BI = 16, 64, 32


def scores_with_tail(tail, tail_scope="shared"):
    """Q K^T over D plus a rope tail of width `tail`, in two gemms into one accumulator (the decode kernels' form)."""
    S = T.dynamic("S")
    alloc = T.alloc_shared if tail_scope == "shared" else T.alloc_fragment

    @T.prim_func
    def main(Q: T.Tensor((H, D + tail), T.bfloat16), K: T.Tensor((S, D + tail), T.bfloat16),
             O: T.Tensor((H, S), T.float32)):
        with T.Kernel(T.ceildiv(S, BI), threads=128) as bx:
            q = T.alloc_shared((H, D), T.bfloat16)
            q_tail = alloc((H, tail), T.bfloat16)
            k = T.alloc_shared((BI, D), T.bfloat16)
            k_tail = T.alloc_shared((BI, tail), T.bfloat16)
            acc = T.alloc_fragment((H, BI), T.float32)
            T.copy(Q[:, :D], q)
            T.copy(Q[:, D:], q_tail)
            for i, d in T.Parallel(BI, D):
                k[i, d] = K[bx * BI + i, d]
            for i, d in T.Parallel(BI, tail):
                k_tail[i, d] = K[bx * BI + i, D + d]
            T.fill(k_tail, 0)
            T.gemm(q, k, acc, transpose_B=True, clear_accum=True)
            T.gemm(q_tail, k_tail, acc, transpose_B=True)
            T.copy(acc, O[0, bx * BI])

    return main


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("tail_scope", ["shared", "fragment"])
def test_a_tail_of_width_zero_does_nothing(arch, tail_scope):
    kernel = tilelang.compile(scores_with_tail(0, tail_scope), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "q_tail" not in source and "k_tail" not in source, source
    q, k = rand((H, D), torch.bfloat16, 81), rand((96, D), torch.bfloat16, 82)
    o = poison((H, 96), torch.float32)
    kernel(q, k, o)
    torch.testing.assert_close(o, q.float() @ k.float().T, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("arch", ARCHS)
def test_the_same_kernel_with_a_tail_uses_it(arch):
    kernel = tilelang.compile(scores_with_tail(32), target=f"musa -arch={arch}")
    assert "k_tail" in kernel.get_kernel_source()
    q, k = rand((H, D + 32), torch.bfloat16, 83), rand((64, D + 32), torch.bfloat16, 84)
    o = poison((H, 64), torch.float32)
    kernel(q, k, o)
    # the kernel zero-fills k_tail after loading it: only the first D columns count
    torch.testing.assert_close(o, q[:, :D].float() @ k[:, :D].float().T, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_clearing_gemm_over_an_empty_k_zeroes_its_accumulator(arch):
    @T.prim_func
    def main(O: T.Tensor((H, BI), T.float32)):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((H, 0), T.float16)
            b = T.alloc_shared((BI, 0), T.float16)
            acc = T.alloc_fragment((H, BI), T.float32)
            T.fill(acc, 3.0)
            T.gemm(a, b, acc, transpose_B=True, clear_accum=True)
            T.copy(acc, O)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    o = poison((H, BI), torch.float32)
    kernel(o)
    assert torch.equal(o, torch.zeros(H, BI))


def test_an_element_of_an_empty_tile_is_an_error_naming_it():
    @T.prim_func
    def main(O: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=32):
            tail = T.alloc_fragment((4, 0), T.float32)
            for i in T.Parallel(4):
                O[i] = tail[i, 0]

    with pytest.raises(tilelang.CompileError, match=r"`tail` has no elements \(shape \[4, 0\]\) but is accessed") \
            as raised:
        tilelang.compile(main, target="musa -arch=mp_31")
    # the line of the loop around the access
    assert raised.value.loc is not None and raised.value.loc.lineno == line_of(
        test_an_element_of_an_empty_tile_is_an_error_naming_it, "for i in T.Parallel(4)")


def test_a_reduction_of_an_empty_tile_is_an_error_naming_it():
    @T.prim_func
    def main(O: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=32):
            tail = T.alloc_fragment((4, 0), T.float32)
            total = T.alloc_fragment((4,), T.float32)
            T.reduce_sum(tail, total, dim=1)
            T.copy(total, O)

    with pytest.raises(tilelang.CompileError, match=r"reduce over `tail`, which has no elements") as raised:
        tilelang.compile(main, target="musa -arch=mp_31")
    assert raised.value.loc is not None and raised.value.loc.lineno == line_of(
        test_a_reduction_of_an_empty_tile_is_an_error_naming_it, "T.reduce_sum(tail")


def test_a_negative_extent_is_still_an_error():
    with pytest.raises(tilelang.CompileError, match=r"extent -1 in shape \[4, -1\] must not be negative"):
        @T.prim_func
        def main(O: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=32):
                T.alloc_fragment((4, -1), T.float32)


def test_the_pass_leaves_the_program_without_the_empty_tile():
    from conftest import without_locations
    from tilelang_musa.transform.remove_empty_tiles import remove_empty_tiles

    @T.prim_func
    def before(A: T.Tensor((16, 32), T.float16), B: T.Tensor((16, 32), T.float16)):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((16, 32), T.float16)
            tail = T.alloc_shared((16, 0), T.float16)
            T.copy(A[:, :32], a)
            T.copy(A[:, 32:], tail)
            for i, j in T.Parallel(16, 0):
                tail[i, j] = A[i, j]
            T.fill(tail, 0)
            T.copy(a, B)

    @T.prim_func
    def expected(A: T.Tensor((16, 32), T.float16), B: T.Tensor((16, 32), T.float16)):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((16, 32), T.float16)
            T.copy(A[:, :32], a)
            T.copy(a, B)

    tvm.ir.assert_structural_equal(without_locations(remove_empty_tiles(before)),
                                   without_locations(expected.with_attr("global_symbol", "before")))
