"""The upstream-style examples beside examples/gemm and examples/flash_attention, on both arches: GEMV (warp
shuffles; a tile reduction), split-K GEMM (T.atomic_add), RMS norm, top-k, flash decoding (two kernels) and fp8
per-token quantization, MoE group-limited routing, Gated DeltaNet decode, sparse MLA forward. Each example module is loaded from its file; each kernel is compiled from the example's
prim_func, its MUSA C checked for the construct the example exists to show, and run in the simulator against
torch on fresh inputs, the outputs poisoned (NaN) first."""

import importlib.util
import pathlib
import re

import pytest
import torch

import tilelang
from conftest import poison, rand

EXAMPLES = pathlib.Path(__file__).parents[1] / "examples"
ARCHS = ["mp_31", "mp_22"]


def load(relpath):
    path = EXAMPLES / relpath
    spec = importlib.util.spec_from_file_location(path.stem + "_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gemv = load("gemv/gemv.py")
gemm_splitk = load("gemm_splitk/gemm_splitk.py")
rms_norm = load("norm/rms_norm.py")
topk = load("topk/topk.py")
flash_decoding = load("flash_decoding/flash_decoding.py")
fp8_quant = load("quant/fp8_per_token_quant.py")
moe_routing = load("moe/moe_routing.py")
gdn_decode = load("gdn/gdn_decode.py")
sparse_mla = load("sparse_mla/sparse_mla_fwd.py")
sparse_mla_decode = load("sparse_mla/sparse_mla_decode.py")


def compile_for(arch, program):
    return tilelang.compile(program, target=f"musa -arch={arch}")


def kernel_bodies(source):
    """The `__global__` functions of a generated source."""
    return re.findall(r"__global__ void[^{]*\{", source)


@pytest.mark.parametrize("arch", ARCHS)
def test_gemv_warp_shuffle(arch):
    """Each row's partial sums meet through a butterfly of shuffles over the row's 32 lanes (offsets 16..1),
    on 32-lane (mp_31) and 128-lane (mp_22) warps alike."""
    N, K = 96, 512
    kernel = compile_for(arch, gemv.gemv.func(N, K, block_N=4, reduce_threads=32))
    source = kernel.get_kernel_source()
    assert [int(o) for o in re.findall(r"__shfl_xor_sync\(\w+, acc\[0\], (\d+)\)", source)] == [16, 8, 4, 2, 1]
    A, x, y = rand((N, K), torch.float16, 1), rand((K,), torch.float16, 2), poison((N,), torch.float16)
    kernel(A, x, y)
    torch.testing.assert_close(y.float(), gemv.ref_program(A, x), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch", ARCHS)
def test_gemv_tile_reduce_sum(arch):
    """Element-wise partial products in a fragment, then one T.reduce_sum along the row: a block all-reduce."""
    N, K = 80, 320
    kernel = compile_for(arch, gemv.gemv_tile.func(N, K, block_N=16, block_K=64))
    assert "AllReduce<tl::SumOp" in kernel.get_kernel_source()
    A, x, y = rand((N, K), torch.float16, 3), rand((K,), torch.float16, 4), poison((N,), torch.float16)
    kernel(A, x, y)
    torch.testing.assert_close(y.float(), gemv.ref_program(A, x), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch", ARCHS)
def test_gemm_splitk_atomic_add(arch):
    """split_k blocks per C tile each add their partial product into C with atomic adds: C starts at zero (it
    cannot be poisoned), and every one of the split_k contributions must land."""
    M, N, K, split_k = 128, 192, 256, 4
    kernel = compile_for(arch, gemm_splitk.matmul_splitk.func(M, N, K, 64, 64, 32, split_k))
    source = kernel.get_kernel_source()
    assert "tl::AtomicAdd" in source
    assert ("tl::gemm_ss_mp31_sqmma" if arch == "mp_31" else "tl::gemm_ss_mp22_mma") in source
    assert re.search(r"dim3 grid\(3, 2, 4\)", kernel.get_host_source())
    A, B = rand((M, K), torch.float16, 5), rand((K, N), torch.float16, 6)
    C = torch.zeros((M, N), dtype=torch.float32)
    kernel(A, B, C)
    torch.testing.assert_close(C, gemm_splitk.ref_program(A, B), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("form", ["rms_norm", "rms_norm_splitk"])
def test_rms_norm(arch, dtype, form):
    """Sum of squares by T.reduce_sum on a fragment, T.rsqrt, a weight; the split-K form walks the row in
    column tiles (N = 384 is three of them). The whole-row form in float32 takes rows of 384 elements (a hidden
    size users have): the reduced fragment is placed row by row (32 threads a row), where the coalesced placement
    would let rows straddle thread groups; in float16 rows of 512."""
    M, N = 24, 384 if form == "rms_norm_splitk" or dtype == "float32" else 512
    kernel = compile_for(arch, getattr(rms_norm, form).func(M, N, dtype=dtype))
    source = kernel.get_kernel_source()
    assert "AllReduce<tl::SumOp" in source and "sqrtf(" in source
    torch_dtype = getattr(torch, dtype)
    X, W, Y = rand((M, N), torch_dtype, 7), rand((N,), torch_dtype, 8), poison((M, N), torch_dtype)
    kernel(X, W, Y)
    tol = 1e-2 if dtype == "float16" else 1e-5
    torch.testing.assert_close(Y.float(), rms_norm.ref_program(X, W), rtol=tol, atol=tol)


@pytest.mark.parametrize("arch", ARCHS)
def test_topk(arch):
    """k rounds of a row max and an argmax by equality (max all-reduces of the values, then of the indices);
    values and indices exactly torch.topk's on rows of distinct values. M = 40 leaves the last block partial."""
    M, N, k = 40, 64, 5
    kernel = compile_for(arch, topk.topk.func(M, N, k, block_M=16))
    source = kernel.get_kernel_source()
    assert "AllReduce<tl::MaxOp" in source and re.search(r"row_frag\[\w+\] == max_val\[", source)
    g = torch.Generator().manual_seed(9)
    logits = torch.stack([torch.randperm(N, generator=g) for _ in range(M)]).float() / N - 0.5  # distinct
    values, indices = poison((M, k), torch.float32), torch.full((M, k), -7, dtype=torch.int32)
    kernel(logits, values, indices)
    ref_values, ref_indices = topk.ref_program(logits, k)
    assert torch.equal(values, ref_values)
    assert torch.equal(indices, ref_indices)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("batch,heads,kv_heads,seqlen_kv,dim,num_split", [
    (2, 8, 2, 128, 64, 2),  # GQA, each split a whole number of key blocks
    (1, 4, 4, 200, 32, 4),  # MHA, splits of 50 keys: the last key block of each is masked
])
def test_flash_decoding(arch, batch, heads, kv_heads, seqlen_kv, dim, num_split):
    """Two kernels launched in order: the split kernel (both gemms on the arch's matrix instruction, P staged
    through shared memory) writes partial outputs and log-sum-exps, the combine kernel merges them."""
    kernel = compile_for(arch, flash_decoding.flash_decoding.func(batch, heads, kv_heads, seqlen_kv, dim, num_split))
    source, host = kernel.get_kernel_source(), kernel.get_host_source()
    assert len(kernel_bodies(source)) == 2
    assert host.index("musaLaunchKernel(main_kernel,") < host.index("musaLaunchKernel(main_kernel_1,")
    # T.Pipelined(num_stages=1): warp-specialized on mp_31 (a producer squad loads K and V by TME, each gemm once);
    # on mp_22 software-pipelined in one squad (each gemm in the steady-state loop and in the epilogue).
    gemm, count = ("tl::gemm_ss_mp31_sqmma", 2) if arch == "mp_31" else ("tl::gemm_ss_mp22_mma", 4)
    assert source.count(gemm) == count and "acc_s_cast_staged" in source
    q = rand((batch, heads, dim), torch.float16, 10)
    k = rand((batch, seqlen_kv, kv_heads, dim), torch.float16, 11)
    v = rand((batch, seqlen_kv, kv_heads, dim), torch.float16, 12)
    glse = poison((batch, heads, num_split), torch.float32)
    partial = poison((batch, heads, num_split, dim), torch.float32)
    out = poison((batch, heads, dim), torch.float16)
    kernel(q, k, v, glse, partial, out)
    torch.testing.assert_close(out.float(), flash_decoding.ref_program(q, k, v), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fp8_per_token_quant(arch, dtype):
    """amax by T.reduce_absmax, scale = amax / 448, y = cast(x / scale) to float8_e4m3fn: bit-exact against
    torch's conversion, from float32 or (as Moore Threads' per_token_cast reads it) bfloat16 rows."""
    M, N = 12, 256
    kernel = compile_for(arch, fp8_quant.per_token_quant_fp8.func(M, N, dtype=dtype))
    source = kernel.get_kernel_source()
    assert "AllReduce<tl::MaxOp" in source and "fp8_e4_t* __restrict__ Y" in source
    assert ("bfloat16_t* __restrict__ X" in source) == (dtype == "bfloat16")
    X = (rand((M, N), torch.float32, 13) * 3).to(getattr(torch, dtype))
    Y = torch.full((M, N), float("nan"), dtype=torch.float32).to(torch.float8_e4m3fn)
    scales = poison((M,), torch.float32)
    kernel(X, Y, scales)
    Y_ref, scales_ref = fp8_quant.ref_program(X)
    assert torch.equal(scales, scales_ref)
    assert torch.equal(Y.view(torch.uint8), Y_ref.view(torch.uint8))


@pytest.mark.parametrize("arch", ARCHS)
def test_moe_group_limited_routing(arch):
    """DeepSeek-V3's router in one kernel: group ranks from a shared tile by a serial loop per (token, group), the
    kept groups and then the winners by rounds of T.reduce_max, each winner's score read from a shared copy of the
    scores (no reduction over the row), and the weights normalised: indices exactly torch's, weights to float
    rounding."""
    tokens, experts, groups, topk_group, topk = 40, 64, 8, 3, 6
    kernel = compile_for(arch, moe_routing.moe_routing.func(tokens, experts, groups, topk_group, topk))
    source = kernel.get_kernel_source()
    assert "AllReduce<tl::MaxOp" in source and "AllReduce<tl::SumOp" not in source and "score_s[" in source
    logits, bias = rand((tokens, experts), torch.float32, 11), rand((experts,), torch.float32, 12) * 0.1
    idx, weight = torch.full((tokens, topk), -7, dtype=torch.int32), poison((tokens, topk), torch.float32)
    kernel(logits, bias, idx, weight)
    ref_idx, ref_weight = moe_routing.ref_program(logits, bias, groups, topk_group, topk)
    torch.testing.assert_close(idx, ref_idx, rtol=0, atol=0)
    torch.testing.assert_close(weight, ref_weight, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
def test_gdn_decode_updates_the_state_in_place(arch):
    """One token of Gated DeltaNet per sequence: the state tile decays, takes the delta-rule correction and is read
    out by two T.reduce_sum down K; the new state goes back to the same tensor, value heads sharing key heads."""
    batch, k_heads, v_heads, dim = 2, 2, 4, 64
    kernel = compile_for(arch, gdn_decode.gdn_decode.func(batch, k_heads, v_heads, dim, dim))
    assert kernel.get_kernel_source().count("AllReduce<tl::SumOp") >= 2
    torch.manual_seed(13)
    q, k, v, g, beta, state = gdn_decode.make_inputs(batch, k_heads, v_heads, dim, dim)
    ref_o, ref_state = gdn_decode.ref_program(q, k, v, g, beta, state)
    o = poison((batch, v_heads, dim), torch.bfloat16)
    kernel(q, k, v, g, beta, state, o)
    torch.testing.assert_close(o.float(), ref_o.float(), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(state, ref_state, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("arch", ARCHS)
def test_sparse_mla_forward_gathers_rows_asynchronously(arch):
    """Each token attends to its chosen cache rows, gathered by asynchronous 16-byte row pieces (the next step's
    into the other buffer while this step computes); on mp_31 the rows are copied once more into V_s, so that every
    gemm reads a tile in one major and runs on SQMMA. Invalid and future positions are masked, a token with none
    gets 0."""
    seq, seq_kv, heads, topk = 8, 64, 64, 64
    config = dict(block_H=64, block_I=32, threads=256) if arch == "mp_31" else dict(block_H=32, block_I=16,
                                                                                    threads=128, v_tile=False, kv_buffers=1)
    kernel = compile_for(arch, sparse_mla.sparse_mla_fwd.func(seq, seq_kv, heads, 512, 64, topk, **config))
    source = kernel.get_kernel_source()
    calls = re.findall(r"tl::gemm_ss_(\w+)<[^>]*>\(&(\w+)\[[^]]*\], &(\w+)\[", source)
    assert source.count("tl::cp_async_gs_conditional<16>(&KV_s[") == 2, source  # step 0, then each next step
    assert source.count("tl::cp_async_gs_conditional<16>(&K_tail_s[") == 2, source
    if arch == "mp_31":
        assert {(path, a, b) for path, a, b in calls} == {
            ("mp31_sqmma_swizzled", "Q_s", "KV_s"), ("mp31_sqmma_swizzled", "Q_tail_s", "K_tail_s"),
            ("mp31_sqmma_swizzled", "P_s", "V_s")}, calls
    else:
        assert ("mp22_mma", "P_s", "KV_s") in calls, calls  # the score gemm's N = block_I = 16 is FMA code on mp_22
    torch.manual_seed(14)
    q = torch.randn(seq, heads, 576).to(torch.bfloat16)
    kv = torch.randn(seq_kv, 576).to(torch.bfloat16)
    indices = sparse_mla.make_indices(seq, seq_kv, topk, device="cpu")
    indices[0, :] = -1  # a token with nothing chosen
    out = poison((seq, heads, 512), torch.bfloat16)
    kernel(q, kv, indices, out)
    torch.testing.assert_close(out.float(), sparse_mla.ref_program(q, kv, indices, 512).float(), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("arch", ARCHS)
def test_sparse_mla_decode_gathers_fp8_rows_asynchronously(arch):
    """Each token attends to its chosen rows of the FP8 cache: the fp8 latent rows, their per-128-column scales
    and the bfloat16 rotary rows gathered by asynchronous 16-byte row pieces (the next step's into the other buffer
    on mp_31), dequantized into KV_s (and V_s on mp_31, so that every gemm runs on SQMMA). A -1 position is masked,
    a token with none gets 0."""
    seq, seq_kv, heads, topk = 4, 64, 64, 64
    config = dict(block_H=64, block_I=32, threads=256) if arch == "mp_31" else \
        dict(block_H=32, block_I=16, threads=128, v_tile=False, kv_buffers=1)
    kernel = compile_for(arch, sparse_mla_decode.sparse_mla_decode.func(seq, seq_kv, heads, 512, 64, topk, **config))
    source = kernel.get_kernel_source()
    for tile in ("KV8_s", "scale_s", "K_tail_s"):  # step 0, then each next step
        assert source.count(f"tl::cp_async_gs_conditional<16>(&{tile}[") == 2, source
    # the dequantization reads 8 fp8 values and one broadcast scale at a time (a tile's scale is lane-invariant)
    assert re.search(r"tl::vec_cast<bfloat16_t>\(tl::vec_cast<float>\(\*reinterpret_cast<tl::vec<fp8_e4_t, 8>\*>"
                     r"\(KV8_s \+ [^;]*tl::broadcast<float, 8>\(scale_s\[", source), source
    calls = set(re.findall(r"tl::gemm_ss_(\w+)<[^>]*>\(&(\w+)\[[^]]*\], &(\w+)\[", source))
    if arch == "mp_31":
        assert calls == {("mp31_sqmma_swizzled", "Q_s", "KV_s"), ("mp31_sqmma_swizzled", "Q_tail_s", "K_tail_s"),
                         ("mp31_sqmma_swizzled", "P_s", "V_s")}, calls
    else:
        assert ("mp22_mma", "P_s", "KV_s") in calls, calls  # the score gemm's N = block_I = 16 is FMA code on mp_22
    torch.manual_seed(15)
    q = torch.randn(seq, heads, 576).to(torch.bfloat16)
    cache = sparse_mla_decode.quantize_cache(torch.randn(seq_kv, 576).to(torch.bfloat16), 512)
    indices = sparse_mla_decode.make_indices(seq, seq_kv, topk, device="cpu")
    indices[0, :] = -1  # a token with nothing chosen
    indices[1, 3:40] = -1  # some positions not chosen
    out = poison((seq, heads, 512), torch.bfloat16)
    kernel(q, *cache, indices, out)
    torch.testing.assert_close(out.float(), sparse_mla_decode.ref_program(q, *cache, indices).float(), rtol=2e-2,
                               atol=2e-2)
