"""Run upstream TileLang's `examples/` in the simulator, unchanged but for device strings and sizes.

    python tools/peer_tests/examples.py UPSTREAM_TREE [NAME ...] [--out DIR] [--jobs N] [--timeout S] [--list]

UPSTREAM_TREE is an extracted checkout of tile-ai/tilelang (`git archive HEAD examples | tar -x`). Each entry of
EXAMPLES below names an example folder, the Python that drives it (the example's own `main`/`run_test` and its own
reference check, called with small sizes: the simulator runs every thread of every block on the CPU) and, where an
example fixes its sizes in module-level code, the text substitutions that shrink them. The folder is staged as
run.py stages test folders (device strings to "cpu", target "cuda" to "musa"); the entry runs in its own process
and passes when it exits 0. The table (DIR/results.tsv) gives each entry's outcome and the last line of its error.
Nothing of the upstream tree is kept in this repository.
"""

from __future__ import annotations

import argparse
import concurrent.futures as futures
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import CONFTEST, FLASH_ATTN_STANDIN, rewrite  # noqa: E402  (the peer-test harness's staging, shared)

# The examples' torch.cuda calls (streams, device queries) are answered by the peer harness's stand-ins (CONFTEST).
PRELUDE = CONFTEST + '''
import sys
sys.path.insert(0, ".")
'''

# fla (flash-linear-attention, Triton kernels): the input normalisation and the linear-attention forward the
# linear_attention examples call around their own torch reference.
FLA_L2NORM = '''import torch


@torch.no_grad()  # a kernel launch, as fla's: its result is a new leaf
def l2norm_fwd(x, eps=1e-6, output_dtype=None):
    rstd = torch.rsqrt(x.float().pow(2).sum(-1, keepdim=True) + eps)
    return (x.float() * rstd).to(output_dtype or x.dtype), rstd.squeeze(-1)
'''

FLA_LINEAR_ATTN = '''import torch


def fused_chunk_linear_attn(q, k, v, scale=None, initial_state=None, output_final_state=False, normalize=True,
                            head_first=False):
    # (B, S, H, D) unless head_first; o_t = scale * q_t (sum over s <= t of k_s v_s^T)
    if head_first:
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    qf, kf, vf = q.float() * scale, k.float(), v.float()
    scores = torch.einsum("bshd,bthd->bhst", qf, kf).tril()
    o = torch.einsum("bhst,bthd->bshd", scores, vf)
    state = torch.einsum("bthk,bthv->bhkv", kf, vf)
    if initial_state is not None:
        o = o + torch.einsum("bshk,bhkv->bshv", qf, initial_state.float())
        state = state + initial_state.float()
    if normalize:
        o = o / (torch.einsum("bshk,bshk->bsh", qf, kf.cumsum(1))[..., None] + 1e-6)
    o = o.to(q.dtype)
    return (o.transpose(1, 2) if head_first else o), (state if output_final_state else None)
'''

STANDINS = {"flash_attn.py": FLASH_ATTN_STANDIN, "fla/__init__.py": "", "fla/ops/__init__.py": "",
            "fla/ops/linear_attn.py": FLA_LINEAR_ATTN, "fla/modules/__init__.py": "",
            "fla/modules/l2norm.py": FLA_L2NORM}


@dataclass(frozen=True)
class Example:
    name: str
    folder: str
    code: str  # Python run in the staged folder
    shrink: dict[str, dict[str, str]] = field(default_factory=dict)  # file -> {old text: new text}
    # printed once the example's own reference check passed: a later failure to import a CUDA-only package for the
    # benchmark that follows (triton, flash_attn) leaves the entry "checked", not failed
    checked: str = ""


def script(file: str, *argv: str) -> str:
    """Run `file` as __main__ with the given command line."""
    return f"import runpy; sys.argv = {[file, *argv]!r}; runpy.run_path({file!r}, run_name='__main__')"


EXAMPLES = [
    Example("gemm", "gemm", "import example_gemm as m; m.main()"),
    Example("gemm_persistent", "gemm", "import example_gemm_persistent as m; m.main(M=512, N=512, K=512)"),
    Example("gemm_splitk", "gemm_splitk", "import example_tilelang_gemm_splitk as m; m.main()",
            {"example_tilelang_gemm_splitk.py": {"M = 1024": "M = 256", "N = 1024": "N = 256"}}),
    Example("gemm_splitk_vec_atomic", "gemm_splitk",
            "import example_tilelang_gemm_splitk_vectorize_atomicadd as m; m.main()",
            {"example_tilelang_gemm_splitk_vectorize_atomicadd.py": {"M = 1024": "M = 256", "N = 1024": "N = 256"}}),
    Example("gemm_streamk", "gemm_streamk", "import example_tilelang_gemm_streamk as m; m.main()"),
    Example("gemv", "gemv", "sys.argv += ['--n', '256', '--k', '256']; import example_gemv as m; m.main(do_bench=False)"),
    Example("elementwise_add", "elementwise", "import example_elementwise_add as m; m.main(M=256, N=256)"),
    Example("rms_norm", "norm", "import rms_norm as m; m.test_rms_norm(M=256, N=1024)"),
    Example("layernorm", "norm", script("layernorm.py"),
            {"layernorm.py": {"N, D = 4096, 8192": "N, D = 64, 512"}}),
    Example("online_softmax", "online_softmax", "import online_softmax",
            {"online_softmax.py": {"M = 8192\nN = 8192": "M = 16\nN = 8192"}}),
    Example("cast_per_token_fp8", "cast", "import example_per_token_cast_to_fp8 as m; m.main(M=256, N=512, blk_m=8)",
            checked="All checks pass."),
    Example("cast_group_per_split_token_fp8", "cast",
            "import example_group_per_split_token_cast_to_fp8 as m; "
            "m.main(M=256, N=512, BG=2, blk_m=4, batch_sizes=[64, 192])"),
    Example("topk", "topk", "import example_topk as m; m.main(argv=['--M', '128'])"),
    Example("hadamard", "hadamard_transform", script("example_hadamard.py", "--batch", "4", "--dim", "1024")),
    Example("dynamic_shape", "dynamic_shape", "import example_dynamic as m; m.main(M=256, N=256, K=256)"),
    Example("eager_jit_notebook", "eager_jit", script("eagerjit.en.py"),
            {"eagerjit.en.ipynb": {"for _ in range(10000)": "for _ in range(100)", "/ 10000 / 1000": "/ 100 / 1000"}}),
    Example("fusedmoe", "fusedmoe",
            "import example_fusedmoe_tilelang as m; m.main(d_hidden=256, d_expert=128, n_routed_experts=4, "
            "n_shared_experts=1, n_experts_per_token=2, batch_size=1, seq_len=64)"),
    Example("grouped_gemm_fwd", "grouped_gemm",
            script("example_grouped_gemm_fwd.py", "--batch_sizes", "64, 128", "--K", "256", "--M", "256")),
    Example("grouped_gemm_bwd", "grouped_gemm",
            script("example_grouped_gemm_bwd.py", "--batch_sizes", "64, 128", "--K", "256", "--M", "256")),
    Example("dequant_gemv_fp16xint4", "dequantize_gemm", "import example_dequant_gemv_fp16xint4 as m; m.main()"),
    Example("dequant_gemm_fine_grained", "dequantize_gemm",
            "import example_dequant_gemm_fine_grained as m; m.main()"),
    Example("dequant_gemm_w4a8", "dequantize_gemm", "import example_dequant_gemm_w4a8 as m; m.main(m=128, n=256, k=256)"),
    Example("dequant_gemm_fp4", "dequantize_gemm",
            "import example_dequant_gemm_fp4_hopper as m; m.main(m=256, n=256, k=256)"),
    Example("dequant_gemm_bf16_fp4", "dequantize_gemm",
            "import example_dequant_gemm_bf16_fp4_hopper as m; m.main(m=256, n=256, k=256)"),
    Example("dequant_gemm_bf16_mxfp4", "dequantize_gemm",
            "import example_dequant_gemm_bf16_mxfp4_hopper as m; m.main(m=256, n=256, k=256)"),
    # The fast paths above import the example folder's own PTX decoders (inline `asm volatile`, rejected by
    # T.import_source); these run the same examples' TIR decoding path, which their main() selects by a flag.
    Example("dequant_gemm_bf16_fp4_simple", "dequantize_gemm",
            "import example_dequant_gemm_bf16_fp4_hopper as m; m.main(m=256, n=256, k=256, fast_dequant=False)"),
    Example("dequant_gemm_bf16_mxfp4_simple", "dequantize_gemm",
            "import example_dequant_gemm_bf16_mxfp4_hopper as m; "
            "m.main(m=256, n=256, k=256, fast_dequant=False)"),
    Example("convolution", "convolution",
            "import example_convolution as m; m.main(['--n', '2', '--c', '64', '--h', '16', '--w', '16', '--f', '64'])"),
    Example("fa_mha_fwd_bhsd", "flash_attention",
            "import example_mha_fwd_bhsd as m; m.main(batch=1, heads=2, seq_q=256, seq_kv=256, dim=64, is_causal=True)"),
    Example("fa_mha_fwd_bshd", "flash_attention",
            "import example_mha_fwd_bshd as m; m.main(batch=1, heads=2, seq_len=256, dim=64, is_causal=False)"),
    Example("fa_gqa_fwd_bshd", "flash_attention",
            "import example_gqa_fwd_bshd as m; m.main(batch=1, heads=4, seq_len=256, dim=64, is_causal=True, groups=2)"),
    Example("fa_mha_bwd_bhsd", "flash_attention",
            "import example_mha_bwd_bhsd as m; m.main(BATCH=1, H=2, N_CTX=256, D_HEAD=64, causal=True)"),
    Example("fa_mha_bwd_bshd", "flash_attention",
            "import example_mha_bwd_bshd as m; m.main(BATCH=1, H=2, N_CTX=256, D_HEAD=64, causal=False)"),
    Example("fa_gqa_bwd", "flash_attention",
            "import example_gqa_bwd as m; m.main(BATCH=1, H=4, N_CTX=256, D_HEAD_QK=64, D_HEAD_V=64, groups=2, "
            "causal=True)"),
    Example("fa_mha_fwd_varlen", "flash_attention",
            "import example_mha_fwd_varlen as m; m.main(batch=2, heads=2, seq_len=256, dim=64)"),
    Example("flash_decoding_mha", "flash_decoding",
            "import example_mha_inference as m; m.main(BATCH=1, H=2, Q_CTX=64, KV_CTX=512, D_HEAD=64)"),
    Example("flash_decoding_gqa", "flash_decoding",
            "import example_gqa_decode as m; m.main(batch=1, heads=8, groups=2, kv_seqlen=512, dim=64)"),
    # dim=512 keeps 290 KB of shared tiles live in one block (KV double-buffered), over mp_31's 192 KB; with a
    # short context the fp16 reference itself (scores rounded to fp16) misses atol=rtol=1e-4 on over 1% of outputs
    Example("mla_decode", "deepseek_mla",
            "import example_mla_decode as m; m.main(batch=1, heads=64, kv_heads=1, kv_ctx=4096, dim=256, pe_dim=64)"),
    Example("blocksparse_attn", "blocksparse_attention", "import example_tilelang_block_sparse_attn as m; m.main()"),
    Example("sparse_gqa_decode_indice", "blocksparse_attention",
            "import example_tilelang_sparse_gqa_decode_varlen_indice as m; "
            "m.main(batch=2, heads=8, heads_kv=2, max_cache_seqlen=512, dim=64, dim_v=64, block_size=32)"),
    Example("sparse_gqa_decode_mask", "blocksparse_attention",
            "import example_tilelang_sparse_gqa_decode_varlen_mask as m; "
            "m.main(batch=2, heads=8, heads_kv=2, max_cache_seqlen=512, dim=64, dim_v=64, block_size=32)"),
    Example("attention_sink_mha_fwd", "attention_sink",
            "import example_mha_sink_fwd_bhsd as m; m.main(batch=1, heads=2, seq_q=256, seq_kv=256, dim=64)"),
    # the backward picks its tile sizes by CUDA SM version (80 or 90+, else it refuses): the stand-in answers 80
    Example("attention_sink_mha_bwd", "attention_sink",
            "import example_mha_sink_bwd_bhsd as m; m.main(BATCH=1, H=2, N_CTX=256, D_HEAD=64)"),
    Example("attention_sink_gqa_bwd", "attention_sink",
            "import example_gqa_sink_bwd_bhsd as m; m.main(BATCH=1, H=4, N_CTX=256, D_HEAD=64, groups=2)"),
    Example("nsa_fwd", "deepseek_nsa", "import example_tilelang_nsa_fwd as m; m.main()"),
    Example("nsa_decode", "deepseek_nsa", "import example_tilelang_nsa_decode as m; m.main()"),
    Example("linear_attn_fwd", "linear_attention",
            "import example_linear_attn_fwd as m; m.main(B=1, S=128, H=2, D=64)"),
    Example("linear_attn_bwd", "linear_attention",
            "import example_linear_attn_bwd as m; m.main(B=1, S=128, H=2, D=64)"),
    Example("retention_fwd", "linear_attention", script("example_retention_fwd.py", "--B", "1", "--S", "256", "--H", "2")),
    Example("mamba_chunk_scan", "linear_attention",
            script("example_mamba_chunk_scan.py", "--batch", "1", "--heads", "2", "--seq_len", "512", "--chunk_size",
                   "128")),
    Example("mamba_chunk_state", "linear_attention",
            script("example_mamba_chunk_state.py", "--batch", "1", "--heads", "2", "--seq_len", "512", "--chunk_size",
                   "128")),
    Example("gdn_compilation", "gdn", "import pytest; sys.exit(pytest.main(['-q', '-x', '-p', 'no:cacheprovider', "
            "'test_example_gdn_compilation.py']))",
            {"test_example_gdn_compilation.py": {"H = 32": "H = 2", "S = 1024": "S = 256"}}),
]


def notebook_script(path: Path) -> str:
    """A notebook's code cells, in order, as one script (kernels are read from their source file)."""
    cells = json.loads(path.read_text())["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code") + "\n"


def stage(tree: Path, example: Example, out: Path) -> Path:
    source = tree / "examples" / example.folder
    dest = out / "tree" / example.name
    dest.mkdir(parents=True, exist_ok=True)
    for src in source.rglob("*"):
        target = dest / src.relative_to(source)
        if src.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif src.suffix in (".py", ".ipynb"):
            text = rewrite(src.read_text() if src.suffix == ".py" else notebook_script(src), cuda=True)
            target = target.with_suffix(".py")
            for old, new in example.shrink.get(str(src.relative_to(source)), {}).items():
                if old not in text:
                    raise SystemExit(f"{example.name}: {src.name} no longer contains {old!r}")
                text = text.replace(old, new)
            target.write_text(text)
        elif not target.exists():
            target.write_bytes(src.read_bytes())
    (dest / "drive.py").write_text(PRELUDE + "\n" + example.code + "\n")
    for path, text in STANDINS.items():
        (dest / path).parent.mkdir(parents=True, exist_ok=True)
        (dest / path).write_text(text)
    return dest


def last_error(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if "Error" in line or "error:" in line or line.startswith("E "):
            return line.strip()[:240]
    return lines[-1][:240] if lines else ""


def run_one(folder: Path, checked: str, timeout: float) -> tuple[str, str, float]:
    import time

    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", TILELANG_EXECUTION_BACKEND="sim")
    start = time.time()
    try:
        proc = subprocess.run([sys.executable, "drive.py"], cwd=folder, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", f"over {timeout:.0f} s", time.time() - start
    (folder / "drive.log").write_text(proc.stdout + proc.stderr)
    output = proc.stdout + proc.stderr
    if proc.returncode == 0:
        return "pass", "", time.time() - start
    error = last_error(output)
    if checked and checked in proc.stdout and error.startswith("ModuleNotFoundError"):
        return "checked", f"reference check passed; then {error}", time.time() - start
    return "fail", error, time.time() - start


def run_all(folders: dict[str, Path], checked: dict[str, str], jobs: int, timeout: float) -> dict:
    """Each named staged folder's drive.py in its own process, `jobs` at a time, each outcome printed as it
    comes: name -> (status, error, seconds)."""
    results = {}
    with futures.ThreadPoolExecutor(jobs) as pool:
        running = {pool.submit(run_one, folder, checked.get(name, ""), timeout): name for name, folder in folders.items()}
        for job in futures.as_completed(running):
            name = running[job]
            results[name] = job.result()
            status, error, seconds = results[name]
            print(f"{status:8} {name:40} {seconds:6.0f} s  {error}", flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", type=Path)
    parser.add_argument("names", nargs="*", help="entries to run (all when none)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/upstream_examples"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()

    chosen = [e for e in EXAMPLES if not args.names or e.name in args.names]
    if args.list:
        print("\n".join(f"{e.name:32} {e.folder}" for e in chosen))
        return 0
    staged = {e.name: stage(args.tree.resolve(), e, args.out) for e in chosen}
    results = run_all(staged, {e.name: e.checked for e in chosen}, args.jobs, args.timeout)
    lines = [f"{results[e.name][0]}\t{e.name}\t{results[e.name][2]:.0f}\t{results[e.name][1]}" for e in chosen]
    (args.out / "results.tsv").write_text("\n".join(lines) + "\n")
    passed = sum(results[e.name][0] in ("pass", "checked") for e in chosen)
    print(f"\n{passed} of {len(chosen)} examples pass; table in {args.out / 'results.tsv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
