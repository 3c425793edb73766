"""StageGemmOperands: a fragment operand of a gemm whose instruction reads shared memory is copied into a shared
tile first (mp_22's MMA, FMA, and SQMMA for one fragment operand); WMMA takes fragments directly."""

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from conftest import poison, rand, without_locations
from tilelang_musa.target import determine_target
from tilelang_musa.transform.stage_gemm_operands import stage_gemm_operands

M, N, K = 64, 64, 32


def test_fragment_operand_is_copied_to_a_shared_tile_on_mp22():
    @T.prim_func
    def before(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            B_s = T.alloc_shared((K, N), "float16")
            A_f = T.alloc_fragment((M, K), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(B, B_s)
            T.copy(A, A_f)
            T.clear(acc)
            T.gemm(A_f, B_s, acc)
            T.copy(acc, C)

    @T.prim_func
    def expected(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            A_f_staged = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            A_f = T.alloc_fragment((M, K), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(B, B_s)
            T.copy(A, A_f)
            T.clear(acc)
            T.copy(A_f[0:M, 0:K], A_f_staged[0:M, 0:K])
            T.gemm(A_f_staged, B_s, acc)
            T.copy(acc, C)

    func = before.with_attr("target", determine_target("musa -arch=mp_22"))
    staged = stage_gemm_operands(func, {})
    tvm.ir.assert_structural_equal(without_locations(staged),
                                   without_locations(expected.with_attr("target", func.attrs["target"])
                                                      .with_attr("global_symbol", "before")))
    # WMMA (mp_31, SQMMA off) reads the fragment where it is: nothing to stage.
    wmma = before.with_attr("target", determine_target("musa -arch=mp_31"))
    configs = {tilelang.PassConfigKey.TL_DISABLE_SQMMA: True}
    assert stage_gemm_operands(wmma, configs).same_as(wmma)


def operand_program(a_scope, b_scope, dtype="float16", trans_B=False):
    """C = A @ B with each operand loaded into shared memory or a fragment."""
    b_shape = (N, K) if trans_B else (K, N)

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            A_t = T.alloc_shared((M, K), dtype) if a_scope == "shared" else T.alloc_fragment((M, K), dtype)
            B_t = T.alloc_shared(b_shape, dtype) if b_scope == "shared" else T.alloc_fragment(b_shape, dtype)
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_t)
            T.copy(B, B_t)
            T.clear(acc)
            T.gemm(A_t, B_t, acc, transpose_B=trans_B)
            T.copy(acc, C)

    return main


# (arch, A, B, dtype) -> what the source must show: the template and the staged tiles.
CASES = [
    ("mp_31", "fragment", "shared", "float16", "tl::gemm_ss_mp31_sqmma", ["A_t_staged"]),
    ("mp_31", "shared", "fragment", "bfloat16", "tl::gemm_ss_mp31_sqmma", ["B_t_staged"]),
    ("mp_31", "fragment", "fragment", "float16", "tl::gemm_rr_mp31_wmma", []),  # the guide: rr -> WMMA
    ("mp_22", "fragment", "shared", "float16", "tl::gemm_ss_mp22_mma", ["A_t_staged"]),
    ("mp_22", "fragment", "fragment", "bfloat16", "tl::gemm_ss_mp22_mma", ["A_t_staged", "B_t_staged"]),
    ("mp_22", "fragment", "shared", "float32", None, ["A_t_staged"]),  # FMA: no fp32 MMA
    ("mp_31", "fragment", "fragment", "float32", None, ["A_t_staged", "B_t_staged"]),
]


@pytest.mark.parametrize("arch,a_scope,b_scope,dtype,template,staged", CASES)
@pytest.mark.parametrize("trans_B", [False, True])
def test_gemm_with_fragment_operands(arch, a_scope, b_scope, dtype, template, staged, trans_B):
    kernel = tilelang.compile(operand_program(a_scope, b_scope, dtype, trans_B), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    if template is not None:
        assert template in source
    else:
        assert "tl::gemm_" not in source  # FMA: the product is plain loops
    for name in ["A_t_staged", "B_t_staged"]:
        assert (name in source) == (name in staged)
    torch_dtype = getattr(torch, dtype)
    a = rand((M, K), torch_dtype, 1)
    b = rand((N, K) if trans_B else (K, N), torch_dtype, 2)
    c = poison((M, N), torch.float32)
    kernel(a, b, c)
    ref = a.float() @ (b.float().T if trans_B else b.float())
    tol = 1e-4 if dtype == "float32" else 1e-2
    torch.testing.assert_close(c, ref, rtol=tol, atol=tol)
