"""The classic TileLang FlashAttention forward (examples/flash_attention/flash_attention.py) on both arches:
MHA and GQA, causal or not, bshd and bhsd, every warp policy; against torch's attention on fresh inputs.

What each arch must produce: on mp_31 both gemms run on SQMMA, P (a fragment) staged through a shared tile
(SQMMA reads shared memory only); with SQMMA disabled the second gemm reads P from registers on WMMA,
whose A layout differs from its accumulator layout, so P is exchanged through shared memory with a warning.
On mp_22 both gemms run on the warp MMA, P (filled from the first gemm's accumulator) staged through shared memory;
in Moore Threads' mp_22 form, P loaded into a fragment from a shared tile, the second gemm reads P from registers.
"""

import importlib.util
import pathlib

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.diagnostics import TileLangWarning

EXAMPLE = pathlib.Path(__file__).parents[1] / "examples" / "flash_attention" / "flash_attention.py"
_spec = importlib.util.spec_from_file_location("flash_attention_example", EXAMPLE)
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)


def program(**options):
    """The example's prim_func (the jit's inner function) for the given options."""
    args = dict(batch=1, heads=2, seq_len=128, dim=32, is_causal=False)
    args.update(options)
    return example.flash_attention.func(**args)


def run(kernel, heads, seq_len, dim, is_causal, groups=1, layout="bshd", batch=1, seed=0):
    q_shape = (batch, seq_len, heads, dim) if layout == "bshd" else (batch, heads, seq_len, dim)
    kv = (batch, seq_len, heads // groups, dim) if layout == "bshd" else (batch, heads // groups, seq_len, dim)
    q, k, v = rand(q_shape, torch.float16, seed), rand(kv, torch.float16, seed + 1), rand(kv, torch.float16, seed + 2)
    out = poison(q_shape, torch.float16)
    kernel(q, k, v, out)
    ref = example.ref_program(q, k, v, is_causal, groups, layout)
    torch.testing.assert_close(out.float(), ref.float(), rtol=1e-2, atol=1e-2)


# Each arch runs four of the eight (groups, causal, layout) combinations, every pair of two options' values among
# them (each half of the 2x2x2 table has all four pairs); the arches take opposite halves, so every combination is
# built and run on one arch.
HALF = [(1, False, "bshd"), (1, True, "bhsd"), (2, False, "bhsd"), (2, True, "bshd")]
OTHER_HALF = [(g, c, lay) for g in (1, 2) for c in (False, True) for lay in ("bshd", "bhsd") if (g, c, lay) not in HALF]
FORWARD_CASES = [("mp_31", *case) for case in HALF] + [("mp_22", *case) for case in OTHER_HALF]


@pytest.mark.parametrize("arch,groups,is_causal,layout", FORWARD_CASES)
def test_flash_attention_forward(arch, groups, is_causal, layout):
    heads = 2 * groups
    kernel = tilelang.compile(program(heads=heads, is_causal=is_causal, groups=groups, layout=layout),
                              target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    staged = "acc_s_cast_staged"  # P copied to shared memory for an instruction that reads it there
    if arch == "mp_31":
        # Warp-specialized: a producer squad (threads 128..255) loads K and V by TME into a one-slot ring, the
        # consumers wait for it before the first gemm and free the slot after the second.
        assert source.count("tl::gemm_ss_mp31_sqmma") == 2 and staged in source
        assert "__launch_bounds__(256" in source and source.count("tl::tma_load<") == 2
        assert source.count("tl::barrier_wait(") == 2
    else:
        # T.Pipelined(num_stages=1): each gemm in the steady-state loop and once more in the epilogue; K and V loaded
        # by LDLMS right after the gemm that last reads them.
        assert source.count("tl::gemm_ss_mp22_mma") == 4 and staged in source
        assert source.count("tl::cp_async_commit();") == 6 and "tl::cp_async_wait<1>();" in source
    run(kernel, heads, 128, 32, is_causal, groups, layout)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_flash_attention_ragged_sequence(arch):
    """A sequence that is not a multiple of the blocks: the last key block is masked, the last query rows
    are not stored."""
    kernel = tilelang.compile(program(seq_len=200, is_causal=True), target=f"musa -arch={arch}")
    run(kernel, 2, 200, 32, True)


@pytest.mark.parametrize("arch,policy", [("mp_31", "Square"), ("mp_31", "FullCol"), ("mp_22", "FullRow"),
                                         ("mp_22", "Square")])
def test_flash_attention_every_warp_policy(arch, policy):
    """Two squads (mp_31) / two warps (mp_22) split the tiles as the policy says; the accumulators of the two
    gemms and the row statistics meet in the same loops whatever the split."""
    prog = program(seq_len=256, is_causal=True, block_M=128, threads=256, policy=getattr(T.GemmWarpPolicy, policy))
    kernel = tilelang.compile(prog, target=f"musa -arch={arch}")
    run(kernel, 2, 256, 32, True, seed=3)


@pytest.mark.parametrize("policy", ["FullRow", "Square"])
def test_flash_attention_on_wmma_exchanges_p_through_shared_memory(policy):
    """With SQMMA off the second gemm takes P from registers on WMMA; MUSA's WMMA accumulator layout is not
    its A layout, so P moves between threads through a shared tile, and the compiler says so."""
    configs = {tilelang.PassConfigKey.TL_DISABLE_SQMMA: True}
    with pytest.warns(TileLangWarning, match=r"fragment `acc_s` is exchanged through a 16384-byte shared-memory tile"):
        kernel = tilelang.compile(program(is_causal=True, policy=getattr(T.GemmWarpPolicy, policy)),
                                  target="musa -arch=mp_31", pass_configs=configs)
    source = kernel.get_kernel_source()
    assert "tl::gemm_rs_mp31_wmma" in source and "tl::gemm_ss_mp31_wmma" in source and "acc_s_exchange" in source
    run(kernel, 2, 128, 32, True, seed=5)


def _attention_through_a_shared_tile(seq_len, dim, block=64):
    """Moore Threads' mp_22 FlashAttention form: P goes from the first gemm's accumulator through a float shared
    tile into a half fragment, which the second gemm reads (their examples' `temp_shared`)."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    shape = [1, seq_len, 1, dim]

    @T.prim_func
    def main(Q: T.Tensor(shape, "float16"), K: T.Tensor(shape, "float16"), V: T.Tensor(shape, "float16"),
             Output: T.Tensor(shape, "float16")):
        with T.Kernel(seq_len // block, threads=128) as bx:
            Q_shared = T.alloc_shared([block, dim], "float16")
            K_shared = T.alloc_shared([block, dim], "float16")
            V_shared = T.alloc_shared([block, dim], "float16")
            O_shared = T.alloc_shared([block, dim], "float16")
            acc_s = T.alloc_fragment([block, block], "float")
            acc_s_cast = T.alloc_fragment([block, block], "float16")
            acc_o = T.alloc_fragment([block, dim], "float")
            scores_max = T.alloc_fragment([block], "float")
            scores_max_prev = T.alloc_fragment([block], "float")
            scores_scale = T.alloc_fragment([block], "float")
            scores_sum = T.alloc_fragment([block], "float")
            logsum = T.alloc_fragment([block], "float")
            T.copy(Q[0, bx * block:(bx + 1) * block, 0, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity("float"))
            for k in T.Pipelined(seq_len // block, num_stages=1):
                T.copy(K[0, k * block:(k + 1) * block, 0, :], K_shared)
                T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity("float"))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block, block):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                temp_shared = T.alloc_shared([block, block], "float")
                T.copy(acc_s, temp_shared)
                T.copy(temp_shared, acc_s_cast)
                for i, j in T.Parallel(block, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[0, k * block:(k + 1) * block, 0, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, Output[0, bx * block:(bx + 1) * block, 0, :])

    return main


def test_attention_with_p_through_a_shared_tile_reads_p_from_registers_on_mp22():
    """P loaded into a fragment from shared memory takes the MMA's operand layout: the second gemm reads it from
    registers (no staging tile), and the kernel (Q, K, V, O and the float P tile of 16 KiB each) fits mp_22's
    72 KiB, O sharing its bytes with P's tile."""
    kernel = tilelang.compile(_attention_through_a_shared_tile(128, 128), target="musa -arch=mp_22")
    source = kernel.get_kernel_source()
    assert "tl::gemm_rs_mp22_mma<64, 128, 64," in source and "_staged" not in source
    assert "tl::gemm_ss_mp22_mma<64, 64, 128," in source
    q, k, v = (rand((1, 128, 1, 128), torch.float16, seed) for seed in (41, 42, 43))
    out = poison((1, 128, 1, 128), torch.float16)
    kernel(q, k, v, out)
    ref = example.ref_program(q, k, v, False, 1, "bshd")
    torch.testing.assert_close(out.float(), ref.float(), rtol=1e-2, atol=1e-2)
