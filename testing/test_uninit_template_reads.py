"""Fragments a GEMM template reads before anything wrote them, named in the simulator's checked mode (issue 41).

The kernel hands `&C_f[0]` to the GEMM template; without clear_accum the template adds to the accumulator, so an
accumulator nothing cleared or filled holds the poison (a NaN), and every output is NaN. The checked print names
the array it hands out (tl_sim::HandOutLocal), and the template checks its accumulator before the first MMA
(tl_sim::CheckAccumulatorRead) and its register operands as it fetches them: the report names the fragment, the
element, the GEMM's line of the generated source, the user's line and the thread (uninit_reads.h)."""

import inspect
import re

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_musa.launcher import KernelLaunchError

HERE = inspect.getsourcefile(lambda: None)
M = N = K = 64

# (arch, PassConfig, the template the GEMM must take)
PATHS = [
    ("mp_22", {}, "gemm_ss_mp22_mma"),
    ("mp_31", {}, "gemm_ss_mp31_sqmma"),
    ("mp_31", {"tl.disable_sqmma": True}, "gemm_ss_mp31_wmma"),
]
PATH_IDS = ["mp22-mma", "mp31-sqmma", "mp31-wmma"]


def user_line(marker: str) -> int:
    with open(HERE) as f:
        return next(number for number, text in enumerate(f, 1) if marker in text and "user_line(" not in text)


def accumulator_never_cleared():
    @T.prim_func
    def gemm_no_clear(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            C_f = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_f)  # C_f: no T.clear
            T.copy(C_f, C)

    return gemm_no_clear


def accumulated_over_k(cleared: bool):
    @T.prim_func
    def gemm_over_k(A: T.Tensor((M, 4 * K), "float16"), B: T.Tensor((4 * K, N), "float16"),
                    C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            C_f = T.alloc_fragment((M, N), "float32")
            if cleared:
                T.clear(C_f)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[0, k * K], A_s)
                T.copy(B[k * K, 0], B_s)
                T.gemm(A_s, B_s, C_f)  # accumulated over k
            T.copy(C_f, C)

    return gemm_over_k


def register_operand_never_written():
    @T.prim_func
    def gemm_rs_bug(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_f = T.alloc_fragment((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            C_f = T.alloc_fragment((M, N), "float32")
            T.clear(C_f)
            T.copy(B, B_s)
            T.gemm(A_f, B_s, C_f)  # A_f is never written
            T.copy(C_f, C)

    return gemm_rs_bug


def halves(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(torch.float16)


@pytest.mark.parametrize("arch,configs,template", PATHS, ids=PATH_IDS)
def test_an_accumulator_the_gemm_reads_before_any_write_is_named(arch, configs, template, monkeypatch):
    kernel = tilelang.compile(accumulator_never_cleared(), target=f"musa -arch={arch}", pass_configs=configs)
    source = kernel.get_kernel_source()
    assert template in source and "tl_sim::" not in source  # the path, and the MUSA C is unchanged
    a, b = halves((M, K), 1), halves((K, N), 2)
    c = torch.zeros(M, N)
    kernel(a, b, c)  # default mode: no check, every output NaN (poison + a * b)
    assert torch.isnan(c).all()
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    with pytest.raises(KernelLaunchError) as info:
        kernel(a, b, torch.zeros(M, N))
    message = str(info.value)
    assert re.search(r"block \(0,0,0\), thread \(\d+,0,0\): uninitialised read: fragment(/local)? load of `C_f` at "
                     r"element \d+, read by the GEMM as its accumulator \(T.gemm adds to it: clear_accum is off\), "
                     r"which this thread has not written", message), message
    line = int(re.search(r"\(line (\d+) of the kernel source;", message).group(1))
    assert template in source.splitlines()[line - 1]  # the GEMM's line, not the later copy's
    assert f"{HERE}:{user_line('# C_f: no T.clear')} in the user's source" in message, message


@pytest.mark.parametrize("arch,configs,template", PATHS, ids=PATH_IDS)
def test_a_pipelined_accumulation_is_not_reported_and_an_uncleared_one_is(arch, configs, template, monkeypatch):
    """The accumulator is read by every k step's GEMM: cleared first, no report (and the numerics hold); not
    cleared, the first k step's read is named."""
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    a, b = halves((M, 4 * K), 3), halves((4 * K, N), 4)
    kernel = tilelang.compile(accumulated_over_k(True), target=f"musa -arch={arch}", pass_configs=configs)
    assert template in kernel.get_kernel_source()
    c = torch.full((M, N), float("nan"))
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)
    kernel = tilelang.compile(accumulated_over_k(False), target=f"musa -arch={arch}", pass_configs=configs)
    with pytest.raises(KernelLaunchError, match=r"load of `C_f` at element \d+, read by the GEMM as its accumulator"):
        kernel(a, b, torch.zeros(M, N))


@pytest.mark.parametrize("arch,configs", [("mp_22", {}), ("mp_31", {"tl.disable_sqmma": True})],
                         ids=["mp22-mma", "mp31-wmma"])
def test_a_register_operand_never_written_is_named(arch, configs, monkeypatch):
    """The A operand from a fragment nothing wrote: the operand fetch names the fragment (it said "a register
    operand of the GEMM", element 0, before)."""
    kernel = tilelang.compile(register_operand_never_written(), target=f"musa -arch={arch}", pass_configs=configs)
    source = kernel.get_kernel_source()
    assert re.search(r"tl::gemm_rs_mp(22_mma|31_wmma)<", source), source
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    with pytest.raises(KernelLaunchError) as info:
        kernel(halves((M, K), 5), halves((K, N), 6), torch.zeros(M, N))
    message = str(info.value)
    assert re.search(r"uninitialised read: fragment(/local)? load of `A_f` at element \d+, read by a GEMM operand "
                     r"fetch, which this thread has not written", message), message
    assert f"{HERE}:{user_line('# A_f is never written')} in the user's source" in message, message
