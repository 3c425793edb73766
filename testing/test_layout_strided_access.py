"""A fragment read in a T.Parallel nest at `x[i, jj * 4 + j]`: the nest over (i, j in 4) sits in a serial loop over
jj (deepseek_mhc's mhc_pre sums squares of `x_frag[i, jj * 4 + j]` this way, and gives x_frag to a T.gemm too). The
element an iteration reads moves with jj, in steps of the nest's extent: the thread running (i, j) holds the whole
column set `x[i, 4 * k + j]`, each k in its own slot (as `x[k, i]`, a dimension indexed by jj alone, is held). Where
another op fixed x's layout, the nest reads a relaid copy (an exchange, with a warning)."""

import warnings

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from conftest import poison, rand
from test_transform_layout_inference import MP31, _assert_infers
from tilelang_musa.ir.attrs import LOOP_PLAN, PARALLEL, PARALLEL_LOOP_LAYOUT
from tilelang_musa.layout import Fragment
from tilelang_musa.transform.layout_access import strided_split

S_LAYOUT = Fragment([8, 4], forward_thread_fn=lambda i, j: i * 4 + j, forward_index_fn=lambda i, j: 0)
# column c of row i with s[i, c % 4], in slot c // 4 (derived from s's layout, it shares its replica variable)
_i, _c = tvm.ir.expr.Var("x0", "int32"), tvm.ir.expr.Var("x1", "int32")
X_LAYOUT = Fragment.from_exprs([8, 16], [_i, _c], _i * 4 + _c % 4, _c // 4, replicate_var=S_LAYOUT.replicate_var)


def plan(kind, fragment, **extra):
    recipe = {"kind": kind, "threads": [0, 32], **extra}
    if kind == "fragment":
        recipe["fragment"] = fragment
    return {PARALLEL: 1, PARALLEL_LOOP_LAYOUT: fragment, LOOP_PLAN: recipe}


@T.prim_func
def strided_sum(X: T.Buffer((8, 16), "float32"), S: T.Buffer((8, 4), "float32")):
    T.func_attr({"target": MP31})
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        x = T.alloc_buffer((8, 16), "float32", scope="local.fragment")
        s = T.alloc_buffer((8, 4), "float32", scope="local.fragment")
        for i in T.serial(8, annotations={PARALLEL: 1}):
            for j in T.serial(4, annotations={PARALLEL: 1}):
                s[i, j] = T.float32(0)
        for i in T.serial(8, annotations={PARALLEL: 1}):
            for j in T.serial(16, annotations={PARALLEL: 1}):
                x[i, j] = X[i, j]
        for jj in T.serial(4):
            for i in T.serial(8, annotations={PARALLEL: 1}):
                for j in T.serial(4, annotations={PARALLEL: 1}):
                    s[i, j] = s[i, j] + x[i, jj * 4 + j]
        for i in T.serial(8, annotations={PARALLEL: 1}):
            for j in T.serial(4, annotations={PARALLEL: 1}):
                S[i, j] = s[i, j]


@T.prim_func
def strided_sum_expected(X: T.Buffer((8, 16), "float32"), S: T.Buffer((8, 4), "float32")):
    T.func_attr({"target": MP31})
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        x = T.alloc_buffer((8, 16), "float32", scope="local.fragment")
        s = T.alloc_buffer((8, 4), "float32", scope="local.fragment")
        for i in T.serial(8, annotations=plan("free", S_LAYOUT, width=1)):
            for j in T.serial(4, annotations={PARALLEL: 1}):
                s[i, j] = T.float32(0)
        for i in T.serial(8, annotations=plan("fragment", X_LAYOUT)):
            for j in T.serial(16, annotations={PARALLEL: 1}):
                x[i, j] = X[i, j]
        for jj in T.serial(4):
            for i in T.serial(8, annotations=plan("fragment", S_LAYOUT)):
                for j in T.serial(4, annotations={PARALLEL: 1}):
                    s[i, j] = s[i, j] + x[i, jj * 4 + j]
        for i in T.serial(8, annotations=plan("fragment", S_LAYOUT)):
            for j in T.serial(4, annotations={PARALLEL: 1}):
                S[i, j] = s[i, j]


def test_a_nest_walking_columns_in_steps_of_its_extent_places_them_on_its_threads():
    """s is placed freely (one element per thread); the jj nest runs where s lives, and x follows: column c of row
    i with s[i, c % 4], in slot c // 4. The nest loading x then runs where x lives."""
    _assert_infers(strided_sum, strided_sum_expected, {"s": S_LAYOUT, "x": X_LAYOUT})


def test_the_strided_reading_needs_the_invariant_part_to_step_by_the_extent():
    i, j, jj = (tvm.ir.expr.Var(n, "int32") for n in ("i", "j", "jj"))
    walked, fixed, virtual, split = strided_split((i, jj * 4 + j), [i, j], [8, 4], [8, 16])
    assert (walked, fixed, virtual, split) == ([(0, 0), (2, 1)], [1], [8, 4, 4], {1: 4})
    assert strided_split((i, jj * 2 + j), [i, j], [8, 4], [8, 16]) is None  # jj * 2 + j: windows overlap
    assert strided_split((i, jj + j), [i, j], [8, 4], [8, 16]) is None
    assert strided_split((i, j + 4), [i, j], [8, 4], [8, 16]) is None  # a box (a constant offset)


def mhc_pre_gemm_sqrsum(n=64, tb=32, hb=64, dtype="float16"):
    """deepseek_mhc's mhc_pre_gemm_sqrsum, its shape: sums of squares over column groups of x_frag, which is also the
    A operand of the gemm."""
    @T.prim_func
    def main(x: T.Tensor((n, hb * 2), dtype), fn: T.Tensor((32, hb * 2), dtype), out: T.Tensor((n, 32), "float32"),
             sq: T.Tensor((n, 4), "float32")):
        with T.Kernel(T.ceildiv(n, tb), threads=128) as px:
            out_frag = T.alloc_fragment((tb, 32), "float32")
            sqrsum_part = T.alloc_fragment((tb, 4), "float32")
            T.clear(out_frag)
            T.clear(sqrsum_part)
            for pz in T.Pipelined(2, num_stages=2):
                x_s = T.alloc_shared((tb, hb), dtype)
                fn_s = T.alloc_shared((32, hb), dtype)
                T.copy(x[px * tb, pz * hb], x_s)
                T.copy(fn[0, pz * hb], fn_s)
                x_frag = T.alloc_fragment((tb, hb), dtype)
                T.copy(x_s, x_frag)
                for jj in T.serial(hb // 4):
                    for i, j in T.Parallel(tb, 4):
                        sqrsum_part[i, j] += T.Cast("float32", x_frag[i, jj * 4 + j]) * \
                            T.Cast("float32", x_frag[i, jj * 4 + j])
                T.gemm(x_frag, fn_s, out_frag, transpose_B=True)
            T.copy(out_frag, out[px * tb, 0])
            T.copy(sqrsum_part, sq[px * tb, 0])

    return main


@pytest.mark.parametrize("arch", ["mp_22", "mp_31"])
def test_mhc_pre_gemm_sqrsum_matches_torch(arch):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = tilelang.compile(mhc_pre_gemm_sqrsum(), target=f"musa -arch=mp_{arch[3:]}")
    exchanged = [str(w.message) for w in caught if "x_frag` is exchanged" in str(w.message)]
    source = kernel.get_kernel_source()
    if arch == "mp_31":  # the gemm reads a staged copy of x_frag: nothing else fixes its layout, the nest places it
        assert "tl::gemm_ss_mp31_sqmma" in source and not exchanged
    else:  # x_frag is the MMA's A fragment; the nest reads a copy laid out as it needs
        assert "mp22_mma" in source and len(exchanged) == 1
    x, fn = rand((64, 128), torch.float16, 31), rand((32, 128), torch.float16, 32)
    out, sq = poison((64, 32), torch.float32), poison((64, 4), torch.float32)
    kernel(x, fn, out, sq)
    torch.testing.assert_close(out, x.float() @ fn.float().T, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(sq, (x.float() ** 2).view(64, 32, 4).sum(1), rtol=1e-5, atol=1e-4)
