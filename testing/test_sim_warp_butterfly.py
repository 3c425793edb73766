"""The simulator runs the xor butterfly of tl::AllReduce / tl::WarpReduce as one rendezvous of the warp (sim/warp.h,
XorButterfly) outside checked mode and profiling, and as one shuffle per round and word inside them. Both must give
the same bits: each kernel runs in both modes on the same inputs (TILELANG_SIM_CHECK is read at launch) and the
outputs are compared byte for byte, and against torch."""

import importlib.util
import pathlib

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

EXAMPLE = pathlib.Path(__file__).parents[1] / "examples" / "flash_attention" / "flash_attention.py"
_spec = importlib.util.spec_from_file_location("flash_attention_example_butterfly", EXAMPLE)
flash_example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(flash_example)

REF = {"sum": lambda x: x.sum(1), "max": lambda x: x.amax(1), "absmax": lambda x: x.abs().amax(1)}


def run_both_modes(monkeypatch, kernel, inputs, make_output):
    outs = []
    for checked in (False, True):
        if checked:
            monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
        else:
            monkeypatch.delenv("TILELANG_SIM_CHECK", raising=False)
        out = make_output()
        kernel(*inputs, out)
        outs.append(out)
    monkeypatch.delenv("TILELANG_SIM_CHECK", raising=False)
    return outs


def same_bits(a, b):
    return torch.equal(a.view(-1).view(torch.uint8), b.view(-1).view(torch.uint8))


def row_reduce(kind, dtype, M, N, threads):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), O: T.Tensor((M,), dtype)):
        with T.Kernel(1, threads=threads):
            F = T.alloc_fragment((M, N), dtype)
            R = T.alloc_fragment((M,), dtype)
            T.copy(A, F)
            getattr(T, f"reduce_{kind}")(F, R, dim=1)
            T.copy(R, O)

    return main


@pytest.mark.parametrize("arch,kind,dtype", [
    ("mp_31", "sum", "float16"), ("mp_31", "max", "float32"), ("mp_31", "sum", "float64"),
    ("mp_31", "absmax", "bfloat16"), ("mp_22", "sum", "float32"), ("mp_22", "max", "float16")])
def test_allreduce_butterfly_gives_the_bits_of_one_shuffle_per_round(arch, kind, dtype, monkeypatch):
    M, N = 32, 64
    kernel = tilelang.compile(row_reduce(kind, dtype, M, N, 128), target=f"musa -arch={arch}")
    assert "tl::AllReduce<" in kernel.get_kernel_source()
    torch_dtype = getattr(torch, dtype)
    a = rand((M, N), torch_dtype, 11)
    fused, per_shuffle = run_both_modes(monkeypatch, kernel, [a], lambda: poison((M,), torch_dtype))
    assert same_bits(fused, per_shuffle)
    tol = 1e-5 if dtype in ("float32", "float64") else 2e-2
    torch.testing.assert_close(fused.double(), REF[kind](a.double()).to(torch_dtype).double(), rtol=tol, atol=tol)


def test_batched_allreduce_on_128_lane_warps_gives_the_bits_of_one_shuffle_per_round(monkeypatch):
    # FlashAttention's mp_22 configuration: each score row spans 64 threads of a 128-lane warp, so its max and sum
    # run rounds 1..16 of the butterfly for several rows at once (tl::BatchAllReduce), then meet in shared memory.
    program = flash_example.flash_attention.func(1, 1, 128, 128, False, layout="bhsd", block_M=64, block_N=32,
                                                 num_stages=1, threads=128)
    kernel = tilelang.compile(program, target="musa -arch=mp_22")
    assert "tl::BatchAllReduce<" in kernel.get_kernel_source()
    shape = (1, 1, 128, 128)
    q, k, v = (rand(shape, torch.float16, seed) for seed in (60, 61, 62))
    fused, per_shuffle = run_both_modes(monkeypatch, kernel, [q, k, v], lambda: poison(shape, torch.float16))
    assert same_bits(fused, per_shuffle)
    expected = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
    torch.testing.assert_close(fused.float(), expected, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_warp_reduce_butterfly_on_a_partial_warp(arch, monkeypatch):
    # 48 threads: on mp_31 the second warp has 16 lanes, so round 16 of its lanes reads lanes that do not exist
    # (all-one bits, as one shuffle does); on mp_22 the one warp's second 32-lane segment is partial the same way.
    N = 48

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), K: T.Tensor((N,), "int32"), S: T.Tensor((N,), "float32"),
             X: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            S[tx] = T.warp_reduce_sum(A[tx])
            X[tx] = T.warp_reduce_bitor(K[tx])

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "tl::WarpReduce<tl::SumOp>" in kernel.get_kernel_source()
    a = rand((N,), torch.float32, 13)
    k = torch.randint(0, 1 << 20, (N,), generator=torch.Generator().manual_seed(14), dtype=torch.int32)
    outs = []
    for checked in (False, True):
        if checked:
            monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
        s, x = poison((N,), torch.float32), torch.full((N,), 7, dtype=torch.int32)
        kernel(a, k, s, x)
        outs.append((s, x))
    monkeypatch.delenv("TILELANG_SIM_CHECK", raising=False)
    (s, x), (s_checked, x_checked) = outs
    assert same_bits(s, s_checked) and torch.equal(x, x_checked)
    torch.testing.assert_close(s[:32], a[:32].sum().expand(32), rtol=1e-5, atol=1e-5)
    ors = 0
    for v in k[:32].tolist():
        ors |= v
    assert x[:32].tolist() == [ors] * 32
    # The lanes whose round-16 partner does not exist combine all-one bits: -1 for bitor, NaN for the sum.
    assert x[32:].tolist() == [-1] * 16
    assert torch.isnan(s[32:]).all()


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_lanes_at_different_butterflies_are_a_divergent_collective(arch):
    # Each butterfly is its own collective (its plan's address): lanes 0..15 sum while the others take the max, in
    # one warp, so the last lane to arrive finds the other butterfly pending. One shuffle per round would pair them.
    N = 32

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), S: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            if tx < 16:
                S[tx] = T.warp_reduce_sum(A[tx])
            else:
                S[tx] = T.warp_reduce_max(A[tx])

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl::WarpReduce<tl::SumOp>" in source and "tl::WarpReduce<tl::MaxOp>" in source
    with pytest.raises(RuntimeError, match=r"divergent collective: this thread reaches __shfl_xor_sync .* threads of "
                                           r"warp 0 wait at __shfl_xor_sync"):
        kernel(rand((N,), torch.float32, 15), poison((N,), torch.float32))
