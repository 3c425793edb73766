"""StageGemmOperands: a fragment operand of a gemm whose instruction reads shared memory is copied into a shared
tile first (FMA, and SQMMA for one fragment operand); WMMA and mp_22's MMA take fragments directly, but mp_22's
MMA stages a fragment filled from another gemm's accumulator."""

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from conftest import marked_temporary, poison, rand, without_locations
from tilelang_musa.target import determine_target
from tilelang_musa.transform.stage_gemm_operands import stage_gemm_operands

M, N, K = 64, 64, 32


def test_fragment_filled_from_an_accumulator_is_copied_to_a_shared_tile_on_mp22():
    """P = S cast to half, S a gemm's accumulator: mp_22's MMA could read P from registers, but S's layout is not
    the operand's, so P is staged (one half-precision store) rather than S exchanged (a float one)."""
    @T.prim_func
    def before(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            S = T.alloc_fragment((M, K), "float32")
            P = T.alloc_fragment((M, K), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s[0:K, 0:K], S, clear_accum=True)
            T.copy(S, P)
            T.gemm(P, B_s, acc, clear_accum=True)
            T.copy(acc, C)

    @T.prim_func
    def expected(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            P_staged = T.alloc_shared((M, K), "float16")
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            S = T.alloc_fragment((M, K), "float32")
            P = T.alloc_fragment((M, K), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s[0:K, 0:K], S, clear_accum=True)
            T.copy(S, P)
            T.copy(P[0:M, 0:K], P_staged[0:M, 0:K])
            T.gemm(P_staged, B_s, acc, clear_accum=True)
            T.copy(acc, C)

    func = before.with_attr("target", determine_target("musa -arch=mp_22"))
    staged = stage_gemm_operands(func, {})
    # P_staged is the compiler's temporary: PlanDynamicSharedMemory may give its bytes to others between its uses
    tvm.ir.assert_structural_equal(without_locations(staged),
                                   without_locations(marked_temporary(expected, "P_staged")
                                                     .with_attr("target", func.attrs["target"])
                                                     .with_attr("global_symbol", "before")))


def test_fragment_loaded_from_memory_stays_in_registers_on_mp22():
    """A fragment filled from global memory takes the MMA's operand layout: nothing to stage (also WMMA)."""
    for arch, configs in (("mp_22", {}), ("mp_31", {tilelang.PassConfigKey.TL_DISABLE_SQMMA: True})):
        func = operand_program("fragment", "shared").with_attr("target", determine_target(f"musa -arch={arch}"))
        assert stage_gemm_operands(func, configs).same_as(func)


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
    ("mp_22", "fragment", "shared", "float16", "tl::gemm_rs_mp22_mma", []),
    ("mp_22", "shared", "fragment", "float16", "tl::gemm_sr_mp22_mma", []),
    ("mp_22", "fragment", "fragment", "bfloat16", "tl::gemm_rr_mp22_mma", []),
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


@pytest.mark.parametrize("arch,template", [("mp_22", "tl::gemm_rs_mp22_mma<64, 64, 32, 2, 1, true,"),
                                           ("mp_31", "tl::gemm_ss_mp31_sqmma")])
def test_transposed_fragment_operand(arch, template):
    """A stored K x M in a fragment (transpose_A): the fragment's slots already hold it K-major."""
    @T.prim_func
    def main(A: T.Tensor((K, M), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=256):
            A_f = T.alloc_fragment((K, M), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_f)
            T.copy(B, B_s)
            T.gemm(A_f, B_s, acc, transpose_A=True, clear_accum=True)
            T.copy(acc, C)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert template in kernel.get_kernel_source()
    a, b, c = rand((K, M), torch.float16, 3), rand((K, N), torch.float16, 4), poison((M, N), torch.float32)
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float().T @ b.float(), rtol=1e-2, atol=1e-2)


def test_fragment_operand_replicated_over_two_warp_columns_on_mp22():
    """FullCol: two warps split N and both need all of A: A's fragment holds each element in both warps."""
    @T.prim_func
    def main(A: T.Tensor((64, 32), "float16"), B: T.Tensor((128, 32), "float16"), C: T.Tensor((64, 128), "float32")):
        with T.Kernel(1, threads=256):
            A_f = T.alloc_fragment((64, 32), "float16")
            B_s = T.alloc_shared((128, 32), "float16")
            acc = T.alloc_fragment((64, 128), "float32")
            T.copy(A, A_f)
            T.copy(B, B_s)
            T.gemm(A_f, B_s, acc, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullCol)
            T.copy(acc, C)

    kernel = tilelang.compile(main, target="musa -arch=mp_22")
    assert "tl::gemm_rs_mp22_mma<64, 128, 32, 1, 2, false, true, true>" in kernel.get_kernel_source()
    a, b, c = rand((64, 32), torch.float16, 5), rand((128, 32), torch.float16, 6), poison((64, 128), torch.float32)
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float().T, rtol=1e-2, atol=1e-2)
