"""mcc's -fmusa-flush-denormals-to-zero in the simulator (issue 38): a kernel built with it flushes float32
subnormal inputs and results of its arithmetic to zero, as the card does; one built without keeps them. The workers
set the host's flush mode only while they run the kernel's blocks: the calling thread (a worker too) gets its mode
back, so torch's arithmetic after the launch keeps subnormals."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison
from tilelang_musa.jit.toolchains import SIM_FLUSH_DENORMALS_FLAG, host_compiler_flags

N = 1024
FLUSH = ["-fmusa-flush-denormals-to-zero"]
TINY = 1e-30  # x * TINY for x ~ 1e-10 is ~1e-40, below float32's smallest normal (2^-126 ~ 1.2e-38)


def scale_kernel():
    """B = A * TINY and C = A + A (A's subnormal elements are an input the flush zeroes), on 8 blocks; then, through
    shared memory behind a barrier (the blocks run on fibers), D = the tile reversed * 0.5."""
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32), C: T.Tensor((N,), T.float32),
             D: T.Tensor((N,), T.float32)):
        with T.Kernel(N // 128, threads=128) as bx:
            S = T.alloc_shared((128,), T.float32)
            tx = T.get_thread_binding()
            B[bx * 128 + tx] = A[bx * 128 + tx] * T.float32(TINY)
            C[bx * 128 + tx] = A[bx * 128 + tx] + A[bx * 128 + tx]
            S[tx] = A[bx * 128 + tx]
            T.sync_threads()
            D[bx * 128 + tx] = S[127 - tx] * T.float32(0.5)

    return main


def inputs(seed):
    """Half the elements ~1e-10 (normal; x * TINY is subnormal), half subnormal themselves (~1e-39 .. 1e-40)."""
    g = torch.Generator().manual_seed(seed)
    normal = (torch.rand(N // 2, generator=g) + 0.1) * 1e-10
    subnormal = (torch.rand(N // 2, generator=g) + 0.1) * 1e-39
    signs = torch.where(torch.rand(N, generator=g) < 0.5, -1.0, 1.0)
    return torch.cat([normal, subnormal])[torch.randperm(N, generator=g)] * signs


def reference(a, flush):
    """The kernel's outputs computed by torch on this thread, with torch's own flush mode as the kernel's."""
    assert torch.set_flush_denormal(flush)  # (False when the CPU has no flush mode)
    try:
        return a * torch.tensor(TINY), a + a, (a.view(-1, 128).flip(1) * 0.5).reshape(-1)
    finally:
        torch.set_flush_denormal(False)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("flags", [[], FLUSH], ids=["kept", "flushed"])
def test_subnormals_are_flushed_only_with_the_flag(arch, flags, monkeypatch, capfd, tmp_path):
    monkeypatch.setenv("TILELANG_SIM_WORKERS", "3")  # the calling thread and two helpers share the blocks
    monkeypatch.setenv("TILELANG_PRINT_DEVICE_COMPILE_COMMAND", "1")
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))  # built here, so the command is printed
    kernel = tilelang.compile(scale_kernel(), target=f"musa -arch={arch}", compile_flags=flags)
    command = next(line for line in capfd.readouterr().err.splitlines() if "sim compile command" in line)
    assert (f" {SIM_FLUSH_DENORMALS_FLAG} " in command) == bool(flags)
    a = inputs(61)
    b, c, d = (poison((N,), torch.float32) for _ in range(3))
    kernel(a, b, c, d)
    for got, expected in zip((b, c, d), reference(a, bool(flags))):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
    normal = a.abs() > 1e-20
    assert (b[normal] != 0).sum().item() == (0 if flags else N // 2)  # x * TINY: subnormal results, flushed or not
    assert (c[~normal] != 0).sum().item() == (0 if flags else N // 2)  # subnormal inputs, flushed or not
    assert (torch.tensor([3e-39]) * 2.0).item() != 0  # the calling thread's mode is its own again


def test_the_flag_maps_to_the_simulator_macro_and_the_last_spelling_wins():
    assert host_compiler_flags(["-O2", *FLUSH]) == (["-O2", SIM_FLUSH_DENORMALS_FLAG], False)
    assert host_compiler_flags([*FLUSH, "-fno-musa-flush-denormals-to-zero"]) == ([], False)
