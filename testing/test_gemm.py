"""T.gemm in the simulator against torch: the user's GEMM example (eager style) on mp_31 and mp_22, and the
FMA path over shapes with tails, transposes, dtypes and policies."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.testing
import tilelang.language as T
from conftest import rand

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "gemm"))
from gemm import matmul  # noqa: E402  (the user's example, verbatim)

TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


@pytest.mark.parametrize("arch,configs,template", [
    ("mp_31", {}, "tl::gemm_ss_mp31_sqmma_swizzled<256, 256, 64,"),
    ("mp_31", {"tl.disable_sqmma": True}, "tl::gemm_ss_mp31_wmma<256, 256, 64,"),
    ("mp_22", {}, "tl::gemm_ss_mp22_mma<256, 256, 64,"),
])
def test_users_gemm_example_matches_torch(arch, configs, template):
    """The seed's tiles (256 x 256 x 64, 512 threads): SQMMA on swizzled tiles on mp_31, WMMA without SQMMA,
    the 128-lane warp MMA on mp_22."""
    kernel = tilelang.compile(
        matmul.compile(M=512, N=256, K=192, block_M=256, block_N=256, block_K=64).program,
        target=f"musa -arch={arch}", pass_configs=configs)
    assert template in kernel.get_device_source()
    a, b = rand((512, 192), torch.float16, 1), rand((192, 256), torch.float16, 2)
    c = kernel(a, b)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)


def gemm_program(M, N, K, bm, bn, bk, trans_A, trans_B, dtype, accum, threads=128, policy=0):
    a_shape = (K, M) if trans_A else (M, K)
    b_shape = (N, K) if trans_B else (K, N)
    a_tile = (bk, bm) if trans_A else (bm, bk)
    b_tile = (bn, bk) if trans_B else (bk, bn)

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared(a_tile, dtype)
            B_s = T.alloc_shared(b_tile, dtype)
            C_f = T.alloc_fragment((bm, bn), accum)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                if trans_A:
                    T.copy(A[k * bk, by * bm], A_s)
                else:
                    T.copy(A[by * bm, k * bk], A_s)
                if trans_B:
                    T.copy(B[bx * bn, k * bk], B_s)
                else:
                    T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f, transpose_A=trans_A, transpose_B=trans_B, policy=policy)
            T.copy(C_f, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("M,N,K", [(64, 64, 32), (96, 80, 48), (33, 17, 70)])
@pytest.mark.parametrize("trans_A,trans_B", [(False, False), (True, False), (False, True), (True, True)])
def test_fma_gemm_shapes_and_transposes(M, N, K, trans_A, trans_B):
    kernel = tilelang.compile(gemm_program(M, N, K, 32, 32, 16, trans_A, trans_B, "float16", "float32"))
    a = rand((K, M) if trans_A else (M, K), torch.float16, 3)
    b = rand((N, K) if trans_B else (K, N), torch.float16, 4)
    c = torch.full((M, N), float("nan"))
    kernel(a, b, c)
    ref = (a.float().T if trans_A else a.float()) @ (b.float().T if trans_B else b.float())
    torch.testing.assert_close(c, ref, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype,accum", [("bfloat16", "float32"), ("float32", "float32"), ("int8", "int32"),
                                         ("float16", "float16")])
@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_fma_gemm_dtypes(dtype, accum, arch):
    M, N, K = 48, 64, 40
    kernel = tilelang.compile(gemm_program(M, N, K, 32, 32, 16, False, False, dtype, accum), target=f"musa -arch={arch}")
    if dtype == "int8":
        a = torch.randint(-8, 8, (M, K), dtype=torch.int8)
        b = torch.randint(-8, 8, (K, N), dtype=torch.int8)
        ref = a.int() @ b.int()
    else:
        a, b = rand((M, K), TORCH[dtype], 5), rand((K, N), TORCH[dtype], 6)
        ref = a.float() @ b.float()
    c = torch.full((M, N), -7, dtype=TORCH.get(accum, torch.int32))
    kernel(a, b, c)
    torch.testing.assert_close(c, ref.to(c.dtype), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_fp16_accumulator_rounds_every_k_step(arch):
    # MUSA has no matrix instruction with an fp16 accumulator: such a T.gemm is an FMA loop accumulating in fp16
    # one k at a time, as Moore Threads' lowering does on the card, so the result follows matmul_naive's per-step
    # rounding (their tests' reference). Over K = 768 that drifts from an fp32 matmul in ~8% of the elements; the
    # earlier fp32 sum per T.gemm call stayed near fp32 and missed matmul_naive in as many.
    M, N, K = 64, 64, 768
    kernel = tilelang.compile(gemm_program(M, N, K, 64, 64, 32, False, False, "float16", "float16"),
                              target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "_sum" not in src and "half_t C_f[" in src
    a, b = rand((M, K), torch.float16, 7), rand((K, N), torch.float16, 8)
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    kernel(a, b, c)
    naive = tilelang.testing.matmul_naive(a, b, torch.float16, torch.float16).float()
    outside = (c.float() - naive).abs() > 0.01 + 0.01 * naive.abs()
    assert outside.float().mean() < 0.005


def test_gemm_shape_mismatch_is_reported_at_the_users_line():
    with pytest.raises(tilelang.CompileError, match=r"T.gemm: K differs between operands: 32 vs 16"):
        @T.prim_func
        def bad(A: T.Tensor((64, 32), "float16")):
            with T.Kernel(1, threads=128):
                A_s = T.alloc_shared((64, 32), "float16")
                B_s = T.alloc_shared((16, 64), "float16")
                C_f = T.alloc_fragment((64, 64), "float32")
                T.gemm(A_s, B_s, C_f)


def test_gemm_accumulator_must_be_a_fragment():
    with pytest.raises(tilelang.CompileError, match="the accumulator C must be a fragment"):
        @T.prim_func
        def bad(A: T.Tensor((64, 32), "float16")):
            with T.Kernel(1, threads=128):
                A_s = T.alloc_shared((64, 32), "float16")
                B_s = T.alloc_shared((32, 64), "float16")
                C_s = T.alloc_shared((64, 64), "float32")
                T.gemm(A_s, B_s, C_s)


def _path_kernel(arch, configs=None, M=128, N=128, K=64, bm=64, bn=64, bk=32, threads=128, dtype="float16",
                 trans_A=False, trans_B=False):
    return tilelang.compile(gemm_program(M, N, K, bm, bn, bk, trans_A, trans_B, dtype, "float32", threads=threads),
                            target=f"musa -arch={arch}", pass_configs=configs or {})


INSTRUCTION_PATHS = [
    ("mp_31", {}, "__musa_sqmma", "tl::gemm_ss_mp31_sqmma_swizzled<"),
    ("mp_31", {"tl.disable_sqmma": True}, "__musa_wmma", "tl::gemm_ss_mp31_wmma<"),
    ("mp_22", {}, "__musa_fmma_m32n32k16_mma", "tl::gemm_ss_mp22_mma<"),
]


# Each path with both dtypes and both transpose settings, and each dtype with each transpose setting: every pair of
# the three choices (6 cases, not all 12 triples; each builds a 128 x 128 GEMM).
@pytest.mark.parametrize("arch,configs,builtin,template,dtype,trans_A,trans_B", [
    pytest.param(*path, dtype, trans, trans, id=f"{path[3][4:-1]}-{dtype}-{'TT' if trans else 'NN'}")
    for p, path in enumerate(INSTRUCTION_PATHS)
    for dtype, trans in zip(["float16", "bfloat16"], [p == 1, p != 1])])
def test_gemm_instruction_paths(arch, configs, builtin, template, dtype, trans_A, trans_B):
    kernel = _path_kernel(arch, configs, dtype=dtype, trans_A=trans_A, trans_B=trans_B)
    assert template in kernel.get_device_source()
    header = Path(__file__).resolve().parents[1] / "src" / "tl_templates" / "musa"
    assert builtin in "".join(p.read_text() for p in header.glob("gemm_*.h"))  # the template calls the built-in
    a = rand((64, 128) if trans_A else (128, 64), TORCH[dtype], 11)
    b = rand((128, 64) if trans_B else (64, 128), TORCH[dtype], 12)
    c = torch.full((128, 128), float("nan"))
    kernel(a, b, c)
    ref = (a.float().T if trans_A else a.float()) @ (b.float().T if trans_B else b.float())
    torch.testing.assert_close(c, ref, rtol=1e-2, atol=1e-2)


def test_disabling_both_mp31_instruction_paths_falls_back_to_fma():
    kernel = _path_kernel("mp_31", {"tl.disable_sqmma": True, "tl.disable_ph1_wmma": True})
    src = kernel.get_device_source()
    assert "tl::gemm_" not in src and "C_f[" in src


def test_shapes_an_instruction_cannot_tile_fall_back_exactly():
    # 48 x 40 tiles: not a multiple of any SQMMA / WMMA n=8 split over 4 warps ... FMA (or WMMA) must still be exact
    kernel = _path_kernel("mp_31", M=96, N=80, K=48, bm=48, bn=40, bk=16)
    a, b = rand((96, 48), torch.float16, 13), rand((48, 80), torch.float16, 14)
    c = torch.full((96, 80), float("nan"))
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("policy", [T.GemmWarpPolicy.Square, T.GemmWarpPolicy.FullRow, T.GemmWarpPolicy.FullCol])
@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_warp_policies(policy, arch):
    kernel = tilelang.compile(gemm_program(128, 128, 64, 128, 128, 32, False, False, "float16", "float32",
                                           threads=256, policy=policy), target=f"musa -arch={arch}")
    assert "tl::gemm_ss_" in kernel.get_device_source()
    a, b = rand((128, 64), torch.float16, 15), rand((64, 128), torch.float16, 16)
    c = torch.full((128, 128), float("nan"))
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)


def test_wmma_with_fragment_operands():
    """gemm_rr on mp_31: A and B copied into register fragments (their layouts come from the instruction)."""
    M, N, K = 64, 64, 32

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            A_f = T.alloc_fragment((M, K), "float16")
            B_f = T.alloc_fragment((K, N), "float16")
            C_f = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_f)
            T.copy(B, B_f)
            T.gemm(A_f, B_f, C_f, clear_accum=True)
            T.copy(C_f, C)

    kernel = tilelang.compile(main, target="musa -arch=mp_31")
    assert "tl::gemm_rr_mp31_wmma<" in kernel.get_device_source()
    a, b = rand((M, K), torch.float16, 17), rand((K, N), torch.float16, 18)
    c = torch.full((M, N), float("nan"))
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch,configs,template", [
    ("mp_31", {}, "sqmma_swizzled"), ("mp_31", {"tl.disable_sqmma": True}, "mp31_wmma"), ("mp_22", {}, "mp22_mma"),
])
def test_instruction_paths_with_tails_in_every_dim(arch, configs, template):
    """M, N, K not multiples of the 64 x 64 x 32 block: the copies zero-fill the tiles' tails and the stores skip
    them, so the instruction path computes full tiles and the result is still exact."""
    M, N, K = 200, 136, 100
    kernel = _path_kernel(arch, configs, M=M, N=N, K=K, bm=64, bn=64, bk=32)
    assert template in kernel.get_device_source()
    a, b = rand((M, K), torch.float16, 19), rand((K, N), torch.float16, 20)
    c = torch.full((M, N), float("nan"))
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_async_sqmma_with_wait(arch):
    """`T.gemm(..., wg_wait=-1)` then `T.wait_sqmma()` (the user's guide): on mp_31 the gemm is issued without
    waiting and the wait completes it; on mp_22 the gemm is synchronous and the wait disappears."""
    M, N, K = 128, 128, 64

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            C_f = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_f, clear_accum=True, wg_wait=-1)
            T.wait_sqmma()
            T.copy(C_f, C)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    src = kernel.get_device_source()
    if arch == "mp_31":
        assert "tl::gemm_ss_mp31_sqmma_swizzled_nowait<" in src and "tl::sqmma_wait<0>()" in src
    else:
        assert "sqmma_wait" not in src
    a, b = rand((M, K), torch.float16, 21), rand((K, N), torch.float16, 22)
    c = torch.full((M, N), float("nan"))
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)
