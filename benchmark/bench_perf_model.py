"""Modelled device times (the simulator's performance model, issue 12) for the project's kernels on the MTT S5000
(mp_31) and S4000 (mp_22), and the error against TileLang-MUSA's published S5000 baselines where we model the
same kernel.

    python benchmark/bench_perf_model.py [--only NAME] [--sample-blocks 16] [--peer TILELANG_MUSA_TREE] [--calibrated]

Per kernel and arch: one launch in the simulator on random inputs, `sample_blocks` evenly spaced blocks of its
grid (profiler.model(); model.py says how the counts become a time), printed as the markdown rows of
benchmark/RESULTS.md. Each case compiles the example's own kernel at the stated shape and config. `--calibrated`
adds a column: the same counters composed with the S5000 figures fitted on Moore Threads' calibration rows
(benchmark/s5000_calibration.py; arch_figures.py's own since issue 40's fifth stop), beside the time with
arch_figures.py's. `--save FILE` pickles each launch's counters, which `s5000_calibration.py --examples FILE`
composes again with other figures without simulating.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import pickle
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]

# TileLang-MUSA benchmark/mp31/baselines/modelops.jsonl line 1 (docs/PERF_FACTS.md section 6a)
FA_BASELINE_US = 5610.0


def example(path: str):
    spec = importlib.util.spec_from_file_location(Path(path).stem, ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def readme_gemm(arch, M=4096, N=4096, K=4096, bm=256, bn=256, bk=64):
    module = example("examples/gemm/gemm.py")
    kernel = module.matmul.compile(M=M, N=N, K=K, block_M=bm, block_N=bn, block_K=bk)  # $TILELANG_TARGET's arch
    return kernel, [torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)]


def readme_gemm_stream_k(arch, M=4096, N=4096, K=4096, bm=256, bn=256, bk=64):
    """The README GEMM under `tl.stream_k` (one persistent block per MP, transform/stream_k.py): profiled whole
    (a stream-K kernel's blocks wait for their predecessors' partials, so no sample of blocks)."""
    import tvm

    module = example("examples/gemm/gemm.py")
    with tvm.transform.PassContext(config={"tl.stream_k": True}):
        kernel = module.matmul.compile(M=M, N=N, K=K, block_M=bm, block_N=bn, block_K=bk)
    return kernel, [torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)]


def classic_gemm(arch, M=4096, N=4096, K=4096):
    """Upstream TileLang's quick-start GEMM: 128x128x32 tiles, 128 threads, 3 stages."""
    sys.path.insert(0, str(ROOT / "benchmark"))
    import tilelang
    import tilelang.language as T
    from bench_pipeline import gemm

    kernel = tilelang.compile(gemm(T, M, N, K, 128, 128, 32, 128, 3), out_idx=[2], target=f"musa -arch={arch}")
    return kernel, [torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)]


def flash_attention(arch, B=2, H=28, S=8192, D=128):
    """The classic FlashAttention forward (examples/flash_attention): on mp_31 block 128x128, 256 threads, 2 stages
    (pipeline planning keeps 1: 2 would need 224 KiB); on mp_22, whose blocks have 72 KiB, 64x32, 128 threads."""
    module = example("examples/flash_attention/flash_attention.py")
    config = dict(block_M=128, block_N=128, num_stages=2, threads=256) if arch == "mp_31" else \
        dict(block_M=64, block_N=32, num_stages=1, threads=128)
    kernel = module.flash_attention(B, H, S, D, False, layout="bhsd", **config)
    return kernel, [torch.randn(B, H, S, D, dtype=torch.float16) for _ in range(3)]


def flash_attention_ws(arch, B=2, H=28, S=8192, D=128):
    """The warp-specialized FlashAttention (examples/async), TileLang-MUSA's S5000 baseline kernel's structure:
    block 256x128, 4 consumer squads + 1 producer squad (640 threads)."""
    if arch != "mp_31":
        return None
    module = example("examples/async/flash_attention_ws.py")
    kernel = module.flash_attention_ws(B, H, S, D, block_M=256, block_N=128)
    return kernel, [torch.randn(B, H, S, D, dtype=torch.float16) for _ in range(3)]


PEER = None  # --peer: an extracted tile-ai/tilelang-musa checkout


def peer_flash_attention(arch, B=2, H=28, S=8192, D=128):
    """Moore Threads' own S5000 FlashAttention forward (benchmark/mp31/modelops/kernels/example_mha_fwd_bhsd.py of
    tile-ai/tilelang-musa, staged unchanged but for device strings by tools/peer_tests/s5000.py), at its published
    configuration: block 256x128, 512 consumer + 128 producer threads, 1 stage, the pass configs its main() sets."""
    if arch != "mp_31" or PEER is None:
        return None
    import tempfile

    import tilelang

    sys.path.insert(0, str(ROOT / "tools" / "peer_tests"))
    from s5000 import stage

    root = stage(Path(PEER).resolve(), Path(tempfile.mkdtemp(prefix="peer_fa_")))
    sys.path.insert(0, str(root))
    from benchmark.mp31.modelops.kernels import example_mha_fwd_bhsd as m

    program = m.flashattn(B, H, S, S, D, False, block_M=256, block_N=128, num_stages=1, threads=512)
    key = tilelang.PassConfigKey
    configs = {key.TL_DISABLE_WARP_SPECIALIZED: False, key.TL_DISABLE_TMA_LOWER: False, key.TL_ENABLE_FAST_MATH: True,
               key.TL_DISABLE_THREAD_STORAGE_SYNC: True, key.TL_ENABLE_MUSA_BURST: True,
               key.TL_ENABLE_REDUCE_BURST: True, key.TL_DISABLE_SAFE_MEMORY_ACCESS: True,
               key.TL_DISABLE_INDEX_TYPE_PROMOTION: True}
    kernel = tilelang.compile(program, out_idx=-1, target="musa -arch=mp_31", pass_configs=configs)
    return kernel, [torch.randn(B, H, S, D, dtype=torch.float16) for _ in range(3)]


def sparse_mla_prefill(arch, S=896, SKV=4096, H=128, topk=2048):
    """Our sparse MLA prefill (examples/sparse_mla) at the shape of Moore Threads' published v2 / v3.2 rows."""
    if arch != "mp_31":
        return None
    module = example("examples/sparse_mla/sparse_mla_fwd.py")
    kernel = module.sparse_mla_fwd(S, SKV, H, 512, 64, topk)
    q, kv = torch.randn(S, H, 576, dtype=torch.bfloat16), torch.randn(SKV, 576, dtype=torch.bfloat16)
    return kernel, [q, kv, module.make_indices(S, SKV, topk, device="cpu")]


def sparse_mla_decode(arch, S=896, SKV=16384, H=128, topk=2048):
    """Our sparse MLA decode over the FP8 cache (examples/sparse_mla) at the shape of Moore Threads' published
    decode v2 row (B1: their B folds into S)."""
    if arch != "mp_31":
        return None
    module = example("examples/sparse_mla/sparse_mla_decode.py")
    kernel = module.sparse_mla_decode(S, SKV, H, 512, 64, topk)
    q = torch.randn(S, H, 576, dtype=torch.bfloat16)
    cache = module.quantize_cache(torch.randn(SKV, 576, dtype=torch.bfloat16), 512)
    return kernel, [q, *cache, module.make_indices(S, SKV, topk, device="cpu")]


def sparse_mla_decode_b256(arch):
    """The same kernel at Moore Threads' decode v1 row: B256 S2 (512 query tokens) over one SKV8192 cache."""
    return sparse_mla_decode(arch, S=512, SKV=8192)


def gdn_decode(arch, B=8, HK=8, HV=16, D=128):
    """Our Gated DeltaNet decode step (examples/gdn) at one of Moore Threads' published gdn_decode shapes."""
    module = example("examples/gdn/gdn_decode.py")
    kernel = module.gdn_decode(B, HK, HV, D, D)
    inputs = list(module.make_inputs(B, HK, HV, D, D))
    IN_PLACE[id(kernel)] = [inputs[5]]  # the recurrent state, updated in place: read and written back
    return kernel, inputs


def moe_routing(arch, tokens=8001, experts=256, groups=8):
    """Our group-limited MoE router (examples/moe), DeepSeek-V3's 256 experts in 8 groups, 4 kept, top 8."""
    module = example("examples/moe/moe_routing.py")
    kernel = module.moe_routing(tokens, experts, groups, 4, 8)
    return kernel, [torch.randn(tokens, experts), torch.randn(experts) * 0.1]


def fp8_per_token_cast(arch, tokens=8001, hidden=4096):
    """Our FP8 per-token quantization (examples/quant), bfloat16 in as theirs, at Moore Threads' per_token_cast
    shape."""
    module = example("examples/quant/fp8_per_token_quant.py")
    kernel = module.per_token_quant_fp8(tokens, hidden, dtype="bfloat16")
    return kernel, [torch.randn(tokens, hidden, dtype=torch.bfloat16)]


def elementwise_add(arch, N=1 << 26, threads=256, num_per_thread=8):
    """The user's elementwise example (examples/elementwise), at a size where DRAM decides."""
    import tilelang
    import tilelang.language as T

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, threads * num_per_thread), threads=threads) as b_x:
            for i, j in T.Parallel(threads, num_per_thread):
                offsets = (b_x * threads + i) * num_per_thread
                C[offsets + j] = A[offsets + j] + B[offsets + j]

    kernel = tilelang.compile(main, out_idx=[2], target=f"musa -arch={arch}")
    return kernel, [torch.randn(N), torch.randn(N)]


IN_PLACE: dict[int, list] = {}  # a case's tensors its kernel updates in place (model(in_place=...)), by kernel

CASES = {
    "readme_gemm": ("README GEMM 4096^3 fp16", "256x256x64, 512 threads, 3 stages", readme_gemm),
    "readme_gemm_stream_k": ("README GEMM 4096^3 fp16, tl.stream_k", "as readme_gemm, 56 persistent blocks",
                             readme_gemm_stream_k),
    "classic_gemm": ("upstream GEMM 4096^3 fp16", "128x128x32, 128 threads, 3 stages", classic_gemm),
    "flash_attention": ("FlashAttention fwd B2 H28 S8192 D128", "mp_31 128x128, 256 threads; mp_22 64x32, 128",
                        flash_attention),
    "flash_attention_ws": ("FlashAttention fwd WS B2 H28 S8192 D128", "256x128, 512+128 threads", flash_attention_ws),
    "elementwise_add": ("elementwise add 2^26 fp32", "256 threads x 8", elementwise_add),
    "peer_flash_attention": ("Moore Threads' FlashAttention fwd (modelops example_mha_fwd_bhsd) B2 H28 S8192 D128",
                             "256x128, 512+128 threads, 1 stage", peer_flash_attention),
}
CASES.update({
    "sparse_mla_prefill": ("sparse MLA prefill S896 SKV4096 H128 topk2048 (examples/sparse_mla)",
                           "block_H 64, block_I 32, 256 threads, async row gathers into 2 buffers, V_s (SQMMA)",
                           sparse_mla_prefill),
    "sparse_mla_decode": ("sparse MLA decode S896 SKV16384 H128 topk2048, FP8 cache (examples/sparse_mla)",
                          ("block_H 64, block_I 32, 256 threads, async row gathers into 2 buffers, dequant to "
                           "KV_s/V_s (SQMMA)"), sparse_mla_decode),
    "sparse_mla_decode_b256": ("sparse MLA decode B256 S2 SKV8192 H128 topk2048, FP8 cache (examples/sparse_mla)",
                               "as sparse_mla_decode", sparse_mla_decode_b256),
    "gdn_decode": ("GDN decode B8 Hk8 Hv16 D128 (examples/gdn)", "block_V 32, 128 threads", gdn_decode),
    "moe_routing": ("MoE routing 8001 tokens, 256 experts / 8 groups (examples/moe)", "block_T 16, 128 threads",
                    moe_routing),
    "fp8_per_token_cast": ("FP8 per-token cast 8001x4096 bf16 (examples/quant)", "block_M 4, 128 threads",
                           fp8_per_token_cast),
})
CALIBRATED = {"flash_attention_ws": FA_BASELINE_US, "peer_flash_attention": FA_BASELINE_US}
# Moore Threads' published S5000 figures for the same operation at the same shape, by their own kernels
# (benchmark/mp31/baselines of tile-ai/tilelang-musa): a yardstick for ours, not a calibration of the model.
THEIRS = {"sparse_mla_prefill": 2544.0, "sparse_mla_decode": 2932.0, "sparse_mla_decode_b256": 5242.0,
          "gdn_decode": 18.78, "moe_routing": 27.74, "fp8_per_token_cast": 122.5}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(CASES), action="append")
    parser.add_argument("--arch", choices=["mp_31", "mp_22"], action="append")
    parser.add_argument("--sample-blocks", type=int, default=16)
    parser.add_argument("--peer", help="an extracted tile-ai/tilelang-musa checkout: models its FlashAttention too")
    parser.add_argument("--calibrated", action="store_true",
                        help="a column with the S5000 figures fitted on the calibration rows (s5000_calibration.py)")
    parser.add_argument("--save", type=Path,
                        help="pickle each launch's counters and model inputs here (s5000_calibration.py --examples "
                             "composes them again with other figures without simulating)")
    args = parser.parse_args()
    saved = []
    global PEER
    PEER = args.peer
    fitted = None
    if args.calibrated:
        sys.path.insert(0, str(ROOT / "benchmark"))
        from s5000_calibration import calibrated_figures
        fitted = calibrated_figures()
    extra = " calibrated figures |" if fitted else ""
    print(f"| kernel | config | arch | modelled time |{extra} TFLOPS | DRAM GB/s | limited by | blocks/MP | published "
          "| error |")
    print("|---|---|---|---|" + ("---|" if fitted else "") + "---|---|---|---|---|---|")
    for name in args.only or CASES:
        title, config, build = CASES[name]
        for arch in args.arch or ["mp_31", "mp_22"]:
            os.environ["TILELANG_TARGET"] = f"musa -arch={arch}"  # for the examples' @tilelang.jit
            built = build(arch)
            if built is None:
                continue
            kernel, inputs = built
            start = time.perf_counter()
            m = kernel.get_profiler().model(inputs, sample_blocks=args.sample_blocks,
                                            in_place=IN_PLACE.get(id(kernel), ()))
            took = time.perf_counter() - start
            published = (CALIBRATED.get(name) or THEIRS.get(name)) if arch == "mp_31" else None
            if args.save:
                from tilelang_musa.profiler.profiler import _distinct_bytes

                saved.append(dict(name=name, arch=arch, counters=m.counters, distinct_bytes=m.distinct_bytes,
                                  registers=m.registers_per_thread, published=published,
                                  in_place_bytes=_distinct_bytes(IN_PLACE.get(id(kernel), ()))))
                args.save.write_bytes(pickle.dumps(saved))
            error = f"{(m.seconds * 1e6 - published) / published:+.0%}" if published else ""
            column = ""
            if fitted:
                from tilelang_musa.profiler.model import model_launch
                from tilelang_musa.profiler.profiler import _distinct_bytes

                old = model_launch(m.counters, fitted[arch], m.distinct_bytes, m.registers_per_thread,
                                   _distinct_bytes(IN_PLACE.get(id(kernel), ()))) if arch in fitted else None
                column = f" {old.seconds * 1e6:,.0f} us ({old.limiter}) |" if old else " |"
            print(f"| {title} | {config} | {arch} | {m.seconds * 1e6:,.0f} us |{column} {m.tflops:.0f} "
                  f"| {m.dram_gbps:.0f} "
                  f"| {m.limiter} | {m.blocks_per_mp} | {f'{published:,.0f} us' if published else ''} | {error} |",
                  flush=True)
            print(m.table(), f"\n  (modelled in {took:.1f} s)", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
