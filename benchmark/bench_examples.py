"""How efficiently every kernel of examples/ uses the hardware, as the simulator counts and models it, on the MTT
S5000 (mp_31) and S4000 (mp_22).

    python benchmark/bench_examples.py [--only NAME] [--arch mp_31] [--sample-blocks 8]

Per example and arch: the example's own kernel at the stated shape, one launch in the simulator on random inputs
with `sample_blocks` evenly spaced blocks (`kernel.get_profiler().model()`), printed as the markdown rows of
benchmark/RESULTS.md: the modelled time, TFLOPS (matrix work) or DRAM GB/s (the launch's distinct bytes), the
limiting resource, and what the counters say of its memory accesses: global load and store sector efficiency
(bytes asked for over bytes of the 32-byte sectors moved), shared-memory bank efficiency (the wavefronts the
requests' distinct words need over those they took; 100%: no bank conflict) and block barriers per block.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmark"))
from bench_perf_model import (  # noqa: E402
    example, flash_attention, flash_attention_ws, gdn_decode, moe_routing, readme_gemm, sparse_mla_decode,
    sparse_mla_prefill,
)


def readme(arch):
    return readme_gemm(arch, 2048, 2048, 2048)


def elementwise(arch, N=1 << 24):
    module = example("examples/elementwise/elementwise_add.py")
    a = torch.randn(N)
    return module.elementwise_add.compile(N=N), [a, torch.randn(N)]


def attention(arch):
    return flash_attention(arch, B=1, H=8, S=2048, D=128)


def attention_ws(arch):
    return flash_attention_ws(arch, B=1, H=8, S=2048, D=128)


def decoding(arch, B=8, H=32, HK=8, S=4096, D=128):
    module = example("examples/flash_decoding/flash_decoding.py")
    kernel = module.flash_decoding(B, H, HK, S, D)
    kv = [torch.randn(B, S, HK, D, dtype=torch.float16) for _ in range(2)]
    return kernel, [torch.randn(B, H, D, dtype=torch.float16), *kv, torch.empty(B, H, 4), torch.empty(B, H, 4, D)]


def splitk(arch, M=1024, N=1024, K=4096):
    module = example("examples/gemm_splitk/gemm_splitk.py")
    kernel = module.matmul_splitk(M, N, K, 64, 64, 32, 4)
    return kernel, [torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16),
                    torch.zeros(M, N)]


def gemv(arch, N=8192, K=8192):
    module = example("examples/gemv/gemv.py")
    return module.gemv(N, K), [torch.randn(N, K, dtype=torch.float16), torch.randn(K, dtype=torch.float16)]


def gemv_tile(arch, N=8192, K=8192):
    module = example("examples/gemv/gemv.py")
    return module.gemv_tile(N, K), [torch.randn(N, K, dtype=torch.float16), torch.randn(K, dtype=torch.float16)]


def rms_norm(arch, M=8192, N=4096):
    module = example("examples/norm/rms_norm.py")
    return module.rms_norm(M, N), [torch.randn(M, N, dtype=torch.float16), torch.randn(N, dtype=torch.float16)]


def topk(arch, M=8192, N=256, k=8):
    module = example("examples/topk/topk.py")
    return module.topk(M, N, k), [torch.randn(M, N)]


def tme_ring(arch, M=2048, N=2048, K=2048):
    if arch != "mp_31":
        return None
    module = example("examples/async/gemm_tme_ring.py")
    return module.gemm_tme_ring(M, N, K), [torch.randn(M, K, dtype=torch.float16),
                                            torch.randn(K, N, dtype=torch.float16)]


def robust_sparse_attention(arch, B=2, S=256, SKV=4096, H=64, D=64, topk=512):
    if arch != "mp_31":
        return None
    module = example("examples/async/sparse_attention_robust.py")
    kernel = module.sparse_attention(B, S, SKV, H, D, topk)
    indices = torch.randint(0, SKV, (B, S, topk), dtype=torch.int32)
    return kernel, [torch.randn(B, S, H, D, dtype=torch.float16), torch.randn(B, SKV, D, dtype=torch.float16),
                    indices]


def sparse_mla(arch):
    return sparse_mla_prefill(arch, S=256, SKV=4096, H=128, topk=1024)


def sparse_mla_decode_small(arch):
    return sparse_mla_decode(arch, S=256, SKV=4096, H=128, topk=1024)


def fp8_quant(arch, tokens=4096, hidden=4096):
    module = example("examples/quant/fp8_per_token_quant.py")
    return module.per_token_quant_fp8(tokens, hidden), [torch.randn(tokens, hidden)]


# name -> (example, shape, builder)
CASES = {
    "gemm": ("gemm/gemm.py (the README GEMM)", "2048^3 fp16, 256x256x64", readme),
    "gemm_tme_ring": ("async/gemm_tme_ring.py", "2048^3 fp16, 128x128x64", tme_ring),
    "gemm_splitk": ("gemm_splitk/gemm_splitk.py", "1024x1024x4096, 64x64x32, split 4", splitk),
    "gemv": ("gemv/gemv.py gemv", "8192x8192 fp16", gemv),
    "gemv_tile": ("gemv/gemv.py gemv_tile", "8192x8192 fp16", gemv_tile),
    "elementwise": ("elementwise/elementwise_add.py", "2^24 fp32", elementwise),
    "rms_norm": ("norm/rms_norm.py", "8192x4096 fp16", rms_norm),
    "topk": ("topk/topk.py", "8192x256, k 8", topk),
    "flash_attention": ("flash_attention/flash_attention.py", "B1 H8 S2048 D128", attention),
    "flash_attention_ws": ("async/flash_attention_ws.py", "B1 H8 S2048 D128, 256x128", attention_ws),
    "flash_decoding": ("flash_decoding/flash_decoding.py (its second kernel, the combine)", "B8 H32 Hkv8 S4096 D128",
                       decoding),
    "sparse_attention_robust": ("async/sparse_attention_robust.py", "B2 S256 SKV4096 H64 D64 topk512",
                                robust_sparse_attention),
    "sparse_mla": ("sparse_mla/sparse_mla_fwd.py", "S256 SKV4096 H128 topk1024 bf16", sparse_mla),
    "sparse_mla_decode": ("sparse_mla/sparse_mla_decode.py", "S256 SKV4096 H128 topk1024, FP8 cache",
                          sparse_mla_decode_small),
    "gdn_decode": ("gdn/gdn_decode.py", "B8 Hk8 Hv16 D128", gdn_decode),
    "moe_routing": ("moe/moe_routing.py", "8001 tokens, 256 experts", moe_routing),
    "fp8_quant": ("quant/fp8_per_token_quant.py", "4096x4096 fp32", fp8_quant),
}


def percent(value: float) -> str:
    return f"{value:.0%}"


def bank_efficiency(c) -> str:
    ideal = c.shared_load_ideal_wavefronts + c.shared_store_ideal_wavefronts
    taken = c.shared_load_wavefronts + c.shared_store_wavefronts
    return percent(ideal / taken) if taken else "-"


def row(title: str, shape: str, arch: str, m) -> str:
    c = m.counters
    rate = f"{m.tflops:.0f} TFLOPS" if c.mma_flops else f"{m.dram_gbps:.0f} GB/s"
    loads = percent(c.global_load_efficiency) if c.global_load_sectors else "-"
    stores = percent(c.global_store_efficiency) if c.global_store_sectors else "-"
    barriers = c.block_barriers / c.blocks if c.blocks else 0
    return (f"| {title} | {shape} | {arch} | {m.seconds * 1e6:,.1f} us | {rate} | {m.limiter} | {loads} | {stores} "
            f"| {bank_efficiency(c)} | {barriers:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(CASES), action="append")
    parser.add_argument("--arch", choices=["mp_31", "mp_22"], action="append")
    parser.add_argument("--sample-blocks", type=int, default=8)
    args = parser.parse_args()
    print("| example | shape | arch | modelled time | rate | limited by | global loads | global stores "
          "| shared banks | barriers / block |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.only or CASES:
        title, shape, build = CASES[name]
        for arch in args.arch or ["mp_31", "mp_22"]:
            os.environ["TILELANG_TARGET"] = f"musa -arch={arch}"  # for the examples' @tilelang.jit
            try:
                built = build(arch)
            except Exception as err:  # a shape or config the arch cannot take: say so in the table
                print(f"| {title} | {shape} | {arch} | {type(err).__name__}: {str(err).splitlines()[0][:100]} "
                      "| | | | | | |", flush=True)
                continue
            if built is None:
                continue
            kernel, inputs = built
            m = kernel.get_profiler().model(inputs, sample_blocks=args.sample_blocks)
            print(row(title, shape, arch, m), flush=True)


if __name__ == "__main__":
    main()
