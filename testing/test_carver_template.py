"""`tilelang.carver.template.MatmulTemplate`, the config helper upstream's autotuned GEMM examples import, with
`tilelang.carver.arch.CUDA` (the MUSA device in use) and `tilelang.carver.roller.rasterization`: hints fit the
arch's shared memory, use 128 or 256 threads, and a kernel built from the best one matches torch."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang.carver.arch import CDNA, CUDA, auto_infer_current_arch
from tilelang.carver.roller.rasterization import NoRasterization
from tilelang.carver.template import MatmulTemplate
from tilelang_musa.errors import UnsupportedError


def _gemm(M, N, K, block_M, block_N, block_K, num_stages, threads, rasterize):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_N, block_K), "float16")
            C_f = T.alloc_fragment((block_M, block_N), "float32")
            T.use_swizzle(10, enable=rasterize)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, C_f, transpose_B=True)
            T.copy(C_f, C[by * block_M, bx * block_N])

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_hints_fit_the_arch_and_the_best_one_builds_a_correct_gemm(arch):
    device = CUDA(f"musa -arch={arch}")
    template = MatmulTemplate(M=256, N=256, K=128, in_dtype=T.float16, out_dtype=T.float16,
                              accum_dtype=T.float32).with_arch(device)
    assert isinstance(template.equivalent_function(), tilelang.tvm.tirx.PrimFunc)
    hints = template.recommend_hints(topk=6)
    assert 0 < len(hints) <= 6
    for hint in hints:
        bm, bn = hint.block
        assert (bm + bn) * hint.rstep[0] * 2 * hint.pipeline_stage <= device.smem_cap
        assert hint.threads in (128, 256)
    best = hints[0]
    config = dict(block_M=best.block[0], block_N=best.block[1], block_K=best.rstep[0],
                  num_stages=best.pipeline_stage if best.pipeline_stage > 1 else 0, threads=best.threads,
                  rasterize=not isinstance(best.rasterization_plan, NoRasterization))
    kernel = tilelang.compile(_gemm(256, 256, 128, **config), target=f"musa -arch={arch}")
    a, b = rand((256, 128), torch.float16, 1), rand((256, 128), torch.float16, 2)
    c = poison((256, 256), torch.float16)
    kernel(a, b, c)
    torch.testing.assert_close(c, (a.float() @ b.float().T).half(), rtol=1e-2, atol=1e-2)


def test_an_amd_device_is_an_error_and_sizes_are_checked():
    with pytest.raises(UnsupportedError, match="CDNA.*AMD device"):
        CDNA("hip")
    with pytest.raises(ValueError, match="K must be a positive int"):
        MatmulTemplate(M=16, N=16, K=0)
    with pytest.raises(ValueError, match="with_arch"):
        MatmulTemplate(M=16, N=16, K=16).recommend_hints()


def test_auto_infer_current_arch_is_the_device_in_use(monkeypatch):
    for arch in ("mp_22", "mp_31"):
        monkeypatch.setenv("TILELANG_SIM_ARCH", arch)
        assert auto_infer_current_arch().arch == arch == CUDA("cuda").arch
