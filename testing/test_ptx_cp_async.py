"""`T.ptx_cp_async` (upstream's raw cp.async between access pointers) and `T.cp_async_barrier_noinc`, in the style
of upstream's deepseek_v32 sparse_mla_fwd_pipelined: producer threads gather rows of KV by an index tensor into a
shared tile, 16 bytes per copy, the consumers T.gemm it. The copy is the LDLMS copy T.async_copy issues; the
barrier form waits for the thread's copies, then arrives; a copy into a laid-out (swizzled) tile must write
contiguous elements in that layout."""

import functools
import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.launcher import KernelLaunchError

M, K, BN, ROWS = 64, 64, 64, 256


def gather_gemm_ws(arrive_after_wait: bool = True):
    """Threads 128..255 copy BN gathered rows of KV into B_s (4 rows each 16 bytes per thread and step) and arrive
    on `ready` (through T.cp_async_barrier_noinc; when `arrive_after_wait` is False, a planted bug, they arrive on
    `ready` first and wait for their copies after, through `done`); threads 0..127 wait on `ready` and compute
    C = A @ B_s^T and copy the gathered tile out to G."""

    @T.prim_func
    def gather_gemm(A: T.Tensor((M, K), "bfloat16"), KV: T.Tensor((ROWS, K), "bfloat16"),
                    Idx: T.Tensor((BN,), "int32"), C: T.Tensor((M, BN), "float32"), G: T.Tensor((BN, K), "bfloat16")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            A_s = T.alloc_shared((M, K), "bfloat16")
            B_s = T.alloc_shared((BN, K), "bfloat16")
            C_l = T.alloc_fragment((M, BN), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            done = T.alloc_barrier(arrive_count=128)
            if tx >= 128:
                for r in T.serial(4):
                    row = Idx[r * 16 + (tx - 128) // 8]
                    T.ptx_cp_async(T.access_ptr(B_s[r * 16 + (tx - 128) // 8, (tx - 128) % 8 * 8], "w", 8),
                                   T.access_ptr(KV[row, (tx - 128) % 8 * 8], "r", 8), 8)
                if arrive_after_wait:
                    T.cp_async_barrier_noinc(ready[0])
                else:
                    T.barrier_arrive(ready[0])
                    T.cp_async_barrier_noinc(done[0])
            else:
                T.copy(A, A_s)
                T.barrier_wait(ready[0], 0)
                T.clear(C_l)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
                T.copy(C_l, C)
                T.copy(B_s, G)  # element reads of the tile, which checked mode watches (the gemm's are not)

    return gather_gemm


def gather_gemm_grouped():
    """Every thread copies its pieces (predicated on the row index: rows < 0 are zeros), commits and waits for
    them (T.ptx_wait_group, a block barrier too), then the block T.gemms the tile: the form without barriers."""

    @T.prim_func
    def gather_gemm(A: T.Tensor((M, K), "bfloat16"), KV: T.Tensor((ROWS, K), "bfloat16"),
                    Idx: T.Tensor((BN,), "int32"), C: T.Tensor((M, BN), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            A_s = T.alloc_shared((M, K), "bfloat16")
            B_s = T.alloc_shared((BN, K), "bfloat16")
            C_l = T.alloc_fragment((M, BN), "float32")
            T.copy(A, A_s)
            for r in T.serial(4):
                row = Idx[r * 16 + tx // 8]
                T.ptx_cp_async(T.access_ptr(B_s[r * 16 + tx // 8, tx % 8 * 8], "w", 8),
                               T.access_ptr(KV[T.max(row, 0), tx % 8 * 8], "r", 8), 8, predicate=row >= 0)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            T.clear(C_l)
            T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C)

    return gather_gemm


@functools.lru_cache(maxsize=None)
def compiled(kind: str, arch: str):
    program = {"ws": gather_gemm_ws, "no_wait": lambda: gather_gemm_ws(False), "grouped": gather_gemm_grouped}[kind]
    return tilelang.compile(program(), target=f"musa -arch={arch}")


def inputs(seed: int, negative_rows: bool = False):
    a, kv = rand((M, K), torch.bfloat16, seed), rand((ROWS, K), torch.bfloat16, seed + 1)
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randperm(ROWS, generator=gen)[:BN].to(torch.int32)
    if negative_rows:
        idx[::5] = -1
    return a, kv, idx, poison((M, BN), torch.float32)


def reference(a, kv, idx):
    rows = torch.where((idx >= 0)[:, None], kv[idx.clamp(min=0).long()], torch.zeros_like(kv[:1]))
    return a.float() @ rows.float().T


def _copy_line(source: str) -> str:
    return next(line for line in source.splitlines() if "tl::cp_async_gs" in line)


@pytest.mark.parametrize("checked", [False, True])
def test_producers_gather_rows_and_arrive_once_their_copies_landed(checked, monkeypatch):
    kernel = compiled("ws", "mp_31")
    source = kernel.get_kernel_source()
    # the copy writes the swizzled address of the element (the gemm's layout), 16 bytes at a time
    assert re.search(r"tl::cp_async_gs<16>\(&B_s\[.* \^ .*\], &KV\[", _copy_line(source))
    assert re.search(r"tl::cp_async_wait_all\(\);\s*\n\s*tl::barrier_arrive\(1\);", source)
    if checked:
        monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    a, kv, idx, c = inputs(3)
    g = poison((BN, K), torch.bfloat16)
    kernel(a, kv, idx, c, g)
    torch.testing.assert_close(g, kv[idx.long()], rtol=0, atol=0)
    torch.testing.assert_close(c, reference(a, kv, idx), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("arch", ["mp_22", "mp_31"])
def test_predicated_copies_completed_by_wait_group(arch, monkeypatch):
    kernel = compiled("grouped", arch)
    source = kernel.get_kernel_source()
    assert "tl::cp_async_gs_conditional<16>(" in _copy_line(source)
    assert re.search(r"tl::cp_async_commit\(\);\s*\n\s*tl::cp_async_wait<0>\(\);", source)
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    a, kv, idx, c = inputs(5, negative_rows=True)
    kernel(a, kv, idx, c)
    torch.testing.assert_close(c, reference(a, kv, idx), rtol=1e-3, atol=1e-3)


def test_arriving_without_waiting_for_the_copies_is_a_checked_mode_error(monkeypatch):
    kernel = compiled("no_wait", "mp_31")
    assert re.search(r"tl::barrier_arrive\(1\);\s*\n\s*tl::cp_async_wait_all\(\);", kernel.get_kernel_source())
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    race = r"data race on byte \d+ of shared .* while thread \(1\d\d,0,0\) stored it"  # a producer's copy
    with pytest.raises(KernelLaunchError, match=race):
        kernel(*inputs(7), poison((BN, K), torch.bfloat16))


def test_a_copy_that_a_swizzle_splits_is_a_compile_error():
    @T.prim_func
    def split(A: T.Tensor((M, K), "bfloat16"), KV: T.Tensor((ROWS, K), "bfloat16"), C: T.Tensor((M, BN), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            A_s = T.alloc_shared((M, K), "bfloat16")
            B_s = T.alloc_shared((BN, K), "bfloat16")
            C_l = T.alloc_fragment((M, BN), "float32")
            T.copy(A, A_s)
            for c in T.serial(7):  # 4 elements from column 8c + 6: across the swizzle's 8-element chunks
                T.ptx_cp_async(T.access_ptr(B_s[tx // 2, c * 8 + 6], "w"), T.access_ptr(KV[tx, c * 8 + 6], "r"), 4)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            T.clear(C_l)
            T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C)

    with pytest.raises(tilelang.CompileError, match=r"T.ptx_cp_async\(T.access_ptr\(B_s(.|\n)*the 8 bytes from "
                                                    r"`B_s\[.*\]` are not the next elements of `B_s`"):
        tilelang.compile(split, target="musa -arch=mp_31")


def test_bad_operands_are_errors_at_the_line():
    def kernel_with(copy):
        @T.prim_func
        def bad(A: T.Tensor((64,), "float16"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32):
                S = T.alloc_shared((64,), "float16")
                copy(S, A, B)

        return bad

    cases = [
        (lambda S, A, B: T.ptx_cp_async(T.access_ptr(S[0], "w"), T.access_ptr(A[0], "r"), 3), r"3 elements of float16"),
        (lambda S, A, B: T.ptx_cp_async(T.access_ptr(A[0], "w"), T.access_ptr(S[0], "r"), 8),
         r"the destination must be a shared tile element"),
        (lambda S, A, B: T.ptx_cp_async(T.access_ptr(S[0], "w"), T.access_ptr(B[0], "r"), 8),
         r"the destination is float16 and the source float32"),
    ]
    for copy, message in cases:  # a count too small for one copy is refused when compiling (it might be a lane)
        with pytest.raises(tilelang.CompileError, match=r"T.ptx_cp_async: " + message):
            tilelang.compile(kernel_with(copy), target="musa -arch=mp_31")


def test_mp21_has_no_ldlms_copies():
    from test_async_barrier import _lower

    @T.prim_func
    def on_mp21(A: T.Tensor((64,), "float16"), B: T.Tensor((64,), "float16")):
        with T.Kernel(1, threads=8):
            tx = T.get_thread_binding()
            S = T.alloc_shared((64,), "float16")
            T.ptx_cp_async(T.access_ptr(S[tx * 8], "w"), T.access_ptr(A[tx * 8], "r"), 8)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            B[tx] = S[tx]

    with pytest.raises(tilelang.CompileError, match=r"T.ptx_cp_async\(T.access_ptr\(S(.|\n)*T.ptx_cp_async: mp_21 has "
                                                    r"no asynchronous \(LDLMS\) copies \(mp_22 and later\)"):
        _lower(on_mp21, "mp_21")
