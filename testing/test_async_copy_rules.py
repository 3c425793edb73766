"""The rules of upstream's and Moore Threads' raw asynchronous copies (their access_ptr_codegen file):
`T.ptx_cp_async` of n elements per lane of a `T.vectorized(L)` loop folds into one LDLMS copy of L * n elements
(FoldCpAsyncLanes; bytes from the logical element count), refused at the line where it cannot; `T.async_copy` commits
without waiting, copies global -> shared only (an AsyncCopyScopeError, an InternalError too, when compiled) and
zero-fills its out-of-bounds pieces; plain SIMT copies are never made asynchronous (TL_ENABLE_ASYNC_COPY governs
the pipelined loads only). Printed on mp_22 and mp_31 (the archs with LDLMS copies) and run in the simulator."""

import functools
import re

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.launcher import KernelLaunchError
from tilelang_musa.tileop.async_copy import AsyncCopyScopeError

ARCHS = ["mp_22", "mp_31"]
THREADS = 32


def lane_copies(dtype: str, lanes: int, wait: bool = True):
    """Each thread copies its run of `lanes` elements into S one element per lane, waits, and the block writes
    S rotated by 8 elements to B (each thread reads other threads' runs)."""
    n = THREADS * lanes

    @T.prim_func
    def lanes_1d(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding()
            S = T.alloc_shared((n,), dtype)
            for v in T.vectorized(lanes):
                T.ptx_cp_async(T.access_ptr(S[tx * lanes + v], "w", 1), T.access_ptr(A[tx * lanes + v], "r", 1), 1)
            T.ptx_commit_group()
            if wait:
                T.ptx_wait_group(0)
            else:
                T.sync_threads()
            for i in T.Parallel(n):
                B[i] = S[(i + 8) % n]

    return lanes_1d


def lane_copies_2d(dtype: str, rows: int, cols: int, lanes: int):
    """A (rows, cols) tile copied in runs of `lanes` elements along its rows, each lane two elements (a 2-element
    lane copy of 4 bytes for float16: folded all the same), rows gathered in reverse."""

    @T.prim_func
    def lanes_2d(A: T.Tensor((rows, cols), dtype), B: T.Tensor((rows, cols), dtype)):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding()
            S = T.alloc_shared((rows, cols), dtype)
            for k in T.serial(rows * cols // (THREADS * lanes * 2)):
                run = k * THREADS + tx
                r, c = run // (cols // (lanes * 2)), run % (cols // (lanes * 2)) * lanes * 2
                for v in T.vectorized(lanes):
                    T.ptx_cp_async(T.access_ptr(S[r, c + v * 2], "w", 2),
                                   T.access_ptr(A[rows - 1 - r, c + v * 2], "r", 2), 2)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            T.copy(S, B)

    return lanes_2d


@functools.lru_cache(maxsize=None)
def compiled(kind: str, arch: str, dtype: str, lanes: int):
    program = lane_copies(dtype, lanes) if kind == "1d" else lane_copies_2d(dtype, 16, 64, lanes)
    return tilelang.compile(program, target=f"musa -arch={arch}")


def _copy_calls(source: str) -> list[str]:
    return re.findall(r"tl::cp_async_gs\w*<\d+>", source)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype,lanes,nbytes", [("float16", 4, 8), ("bfloat16", 8, 16), ("int8", 4, 4),
                                                ("uint8", 16, 16)])
def test_lanes_of_one_element_fold_into_one_copy(arch, dtype, lanes, nbytes, monkeypatch):
    kernel = compiled("1d", arch, dtype, lanes)
    source = kernel.get_kernel_source()
    assert _copy_calls(source) == [f"tl::cp_async_gs<{nbytes}>"]
    assert re.search(rf"tl::cp_async_gs<{nbytes}>\(&\w+\[\(?\(?\(int\)threadIdx.x\)? \* {lanes}\)?\], "
                     rf"&A\[\(?\(?\(int\)threadIdx.x\)? \* {lanes}\)?\]\)", source), source
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    torch_dtype = getattr(torch, dtype)
    n = THREADS * lanes
    if dtype in ("int8", "uint8"):
        a = torch.randint(-128 if dtype == "int8" else 0, 128, (n,), generator=torch.Generator().manual_seed(lanes),
                          dtype=torch.int32).to(torch_dtype)
        b = torch.full((n,), 77, dtype=torch_dtype)
    else:
        a, b = rand((n,), torch_dtype, lanes), poison((n,), torch_dtype)
    kernel(a, b)
    torch.testing.assert_close(b, torch.roll(a, -8), rtol=0, atol=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_lanes_of_two_elements_along_rows_of_a_2d_tile(arch):
    kernel = compiled("2d", arch, "float16", 4)
    assert _copy_calls(kernel.get_kernel_source()) == ["tl::cp_async_gs<16>"]
    a, b = rand((16, 64), torch.float16, 3), poison((16, 64), torch.float16)
    kernel(a, b)
    torch.testing.assert_close(b, a.flip(0), rtol=0, atol=0)


def test_a_missing_wait_after_folded_lanes_is_caught_in_checked_mode(monkeypatch):
    kernel = tilelang.compile(lane_copies("float16", 4, wait=False), target="musa -arch=mp_31")
    assert "tl::cp_async_wait" not in kernel.get_kernel_source()
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    with pytest.raises(KernelLaunchError, match=r"read of shared memory at byte \d+ of `S` .* while an asynchronous "
                                                r"copy \(__musa_memcpy_g2s\) .* has not completed"):
        kernel(rand((128,), torch.float16, 2), poison((128,), torch.float16))


def _compile_lanes(lane_copy, lanes: int = 4, arch: str = "mp_31"):
    @T.prim_func
    def bad(A: T.Tensor((256,), "float16"), B: T.Tensor((256,), "float16")):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding()
            S = T.alloc_shared((256,), "float16")
            for v in T.vectorized(lanes):
                lane_copy(S, A, tx, v)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            B[tx] = S[tx]

    return tilelang.compile(bad, target=f"musa -arch={arch}")


@pytest.mark.parametrize("lane_copy,lanes,why", [
    (lambda S, A, tx, v: T.ptx_cp_async(T.access_ptr(S[tx * 8 + v * 2], "w"), T.access_ptr(A[tx * 8 + v], "r"), 1),
     4, r"the lanes' elements are not 1 apart in both tensors"),
    (lambda S, A, tx, v: T.ptx_cp_async(T.access_ptr(S[tx * 4 + v], "w"), T.access_ptr(A[tx * 4 + v], "r"), 1),
     3, r"3 lanes of 1 make 3 elements of float16, not 4, 8 or 16 bytes"),
    (lambda S, A, tx, v: T.ptx_cp_async(T.access_ptr(S[tx * 4 + v + 1], "w"), T.access_ptr(A[tx * 4 + v], "r"), 1),
     4, r"the run of 4 elements does not provably start at a multiple of its length"),
    (lambda S, A, tx, v: T.ptx_cp_async(T.access_ptr(S[tx * 4 + v], "w"), T.access_ptr(A[tx * 4 + v], "r"), 1,
                                        predicate=v < 2),
     4, r"its predicate depends on the lane `v`"),
])
def test_lanes_that_do_not_fold_are_errors_at_the_line(lane_copy, lanes, why):
    with pytest.raises(tilelang.CompileError, match=r"lane_copy(.|\n)*T.ptx_cp_async: 1 elements of float16: an "
                                                    rf"LDLMS copy moves 4, 8 or 16 bytes; in T.vectorized\({lanes}\) "
                                                    rf"over `v`, its lanes do not fold into one copy: {why}"):
        _compile_lanes(lane_copy, lanes)


def test_a_lone_small_copy_outside_a_vectorized_loop_is_an_error():
    @T.prim_func
    def lone(A: T.Tensor((64,), "float16"), B: T.Tensor((64,), "float16")):
        with T.Kernel(1, threads=THREADS):
            tx = T.get_thread_binding()
            S = T.alloc_shared((64,), "float16")
            T.ptx_cp_async(T.access_ptr(S[tx], "w"), T.access_ptr(A[tx], "r"), 1)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            B[tx] = S[tx]

    with pytest.raises(tilelang.CompileError, match=r"T.ptx_cp_async\(T.access_ptr\(S\[tx\](.|\n)*1 elements of "
                                                    r"float16: an LDLMS copy moves 4, 8 or 16 bytes; fewer elements "
                                                    r"fold into one copy only as the lanes of a T.vectorized loop"):
        tilelang.compile(lone, target="musa -arch=mp_22")


def test_lanes_that_already_are_copies_stay_per_lane_unless_the_fold_is_aligned():
    """Two 8-byte lanes: folded into one 16-byte copy at an even run, kept per lane at an odd one (each lane is an
    aligned copy by itself, the pair would not be)."""
    def program(offset: int):
        @T.prim_func
        def pairs(A: T.Tensor((THREADS * 8 + 4,), "float16"), B: T.Tensor((THREADS * 8,), "float16")):
            with T.Kernel(1, threads=THREADS):
                tx = T.get_thread_binding()
                S = T.alloc_shared((THREADS * 8 + 4,), "float16")
                for v in T.vectorized(2):
                    T.ptx_cp_async(T.access_ptr(S[tx * 8 + offset + v * 4], "w"),
                                   T.access_ptr(A[tx * 8 + offset + v * 4], "r"), 4)
                T.ptx_commit_group()
                T.ptx_wait_group(0)
                for i in T.Parallel(THREADS * 8):
                    B[i] = S[(i + 9) % (THREADS * 8) + offset]

        return tilelang.compile(pairs, target="musa -arch=mp_31")

    for offset, nbytes, per_lane in ((0, 16, False), (4, 8, True)):
        kernel = program(offset)
        source = kernel.get_kernel_source()
        assert _copy_calls(source) == [f"tl::cp_async_gs<{nbytes}>"]
        assert bool(re.search(r"for \(int v\w* = 0; v\w* < 2; \+\+v\w*\) \{\s*tl::cp_async_gs<8>", source)) == per_lane
        a, b = rand((THREADS * 8 + 4,), torch.float16, offset), poison((THREADS * 8,), torch.float16)
        kernel(a, b)
        expect = torch.roll(a[offset:offset + THREADS * 8], -9)
        torch.testing.assert_close(b, expect, rtol=0, atol=0)


def async_copy_tile(n: int, wait: bool):
    """Moore Threads' kernel: `T.async_copy(A[0:n], S)`, then (with `wait`) the user's wait, then S copied out."""

    @T.prim_func
    def tile(A: T.Tensor((n,), "float16"), B: T.Tensor((n,), "float16")):
        with T.Kernel(1, threads=1):
            S = T.alloc_shared((n,), "float16")
            T.async_copy(A[0:n], S)
            if wait:
                T.ptx_wait_group(0)
            T.copy(S, B[0:n])

    return tile


@pytest.mark.parametrize("arch", ARCHS)
def test_async_copy_commits_its_group_and_leaves_the_wait_to_the_user(arch, monkeypatch):
    for wait in (True, False):
        kernel = tilelang.compile(async_copy_tile(4, wait), target=f"musa -arch={arch}")
        source = kernel.get_kernel_source()
        assert re.search(r"tl::cp_async_gs<8>\(&S\[0\], &A\[0\]\);\s*tl::cp_async_commit\(\);", source)
        assert source.count("tl::cp_async_wait") == (1 if wait else 0), "only the user's wait"
        monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
        a, b = rand((4,), torch.float16, 4), poison((4,), torch.float16)
        if wait:
            kernel(a, b)
            torch.testing.assert_close(b, a, rtol=0, atol=0)
        else:  # S is read before the copy has landed: the race checked mode exists to catch
            with pytest.raises(KernelLaunchError, match=r"read of shared memory .* of `S` .* while an asynchronous "
                                                        r"copy \(__musa_memcpy_g2s\) .* has not completed"):
                kernel(a, b)


@pytest.mark.parametrize("arch", ARCHS)
def test_async_copy_out_of_bounds_rows_are_predicated_zero_fills(arch):
    M, K, BM = 130, 32, 128

    @T.prim_func
    def rows(A: T.Tensor((M, K), "float16"), B: T.Tensor((2 * BM, K), "float16")):
        with T.Kernel(T.ceildiv(M, BM), threads=128) as pid_m:
            S = T.alloc_shared((BM, K), "float16")
            T.async_copy(A[pid_m * BM:(pid_m + 1) * BM, 0:K], S)
            T.ptx_wait_group(0)
            T.copy(S, B[pid_m * BM:(pid_m + 1) * BM, 0:K])

    kernel = tilelang.compile(rows, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl::cp_async_gs_conditional<16>(" in source and source.count("tl::cp_async_wait") == 1
    a, b = rand((M, K), torch.float16, 6), poison((2 * BM, K), torch.float16)
    kernel(a, b)
    torch.testing.assert_close(b, torch.cat([a, torch.zeros((2 * BM - M, K), dtype=torch.float16)]), rtol=0, atol=0)


def _scoped_async_copy(kind: str):
    @T.prim_func
    def scoped(A: T.Tensor((64,), "float16"), B: T.Tensor((64,), "float16")):
        with T.Kernel(1, threads=32):
            S0 = T.alloc_shared((64,), "float16")
            S1 = T.alloc_shared((64,), "float16")
            F = T.alloc_fragment((64,), "float16")
            T.copy(A, S0)
            T.copy(A, F)
            if kind == "shared_to_shared":
                T.async_copy(S0, S1)
            elif kind == "global_to_global":
                T.async_copy(A, B)
            elif kind == "fragment_to_shared":
                T.async_copy(F, S1)
            else:
                T.async_copy(S0, B)
            T.copy(S1, B)

    return scoped


@pytest.mark.parametrize("kind,operands", [
    ("shared_to_shared", r"`S0` \(shared.dyn\) -> `S1` \(shared.dyn\)"),
    ("global_to_global", r"`A` \(global\) -> `B` \(global\)"),
    ("fragment_to_shared", r"`F` \(local.fragment\) -> `S1` \(shared.dyn\)"),
    ("shared_to_global", r"`S0` \(shared.dyn\) -> `B` \(global\)"),
])
def test_async_copy_between_other_memories_is_an_error_when_compiled(kind, operands):
    program = _scoped_async_copy(kind)  # defining it is fine: lowering refuses it, where upstream's does
    for error in (AsyncCopyScopeError, tvm.error.InternalError, tilelang.CompileError):
        with pytest.raises(error, match=r"T.async_copy\((.|\n)*T\.async_copy only supports global->shared/shared\.dyn "
                                        rf"copies: {operands}"):
            tilelang.compile(program, target="musa -arch=mp_31")


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("enable", [True, False])
def test_plain_simt_copies_to_shared_are_never_made_asynchronous(arch, enable):
    """Only the loads T.Pipelined moves to an earlier stage become LDLMS copies (TL_ENABLE_ASYNC_COPY=False keeps
    them synchronous: test_software_pipeline.py); a T.Parallel copy into a shared tile stays plain loads and stores
    whatever the key, and T.async_copy / T.ptx_cp_async stay asynchronous whatever it says."""
    @T.prim_func
    def simt(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32"), C: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            S = T.alloc_shared((128,), "float32")
            R = T.alloc_shared((128,), "float32")
            for i in T.Parallel(128):
                S[i] = A[i]
            T.async_copy(A, R)
            T.ptx_wait_group(0)
            B[tx] = S[127 - tx]
            C[tx] = R[(tx + 1) % 128]

    kernel = tilelang.compile(simt, target=f"musa -arch={arch}",
                              pass_configs={tilelang.PassConfigKey.TL_ENABLE_ASYNC_COPY: enable})
    source = kernel.get_kernel_source()
    assert _copy_calls(source) == ["tl::cp_async_gs<16>"] and "&R[" in source and "&S[" not in source
    a, b, c = rand((128,), torch.float32, 8), poison((128,), torch.float32), poison((128,), torch.float32)
    kernel(a, b, c)
    torch.testing.assert_close(b, a.flip(0), rtol=0, atol=0)
    torch.testing.assert_close(c, torch.roll(a, -1), rtol=0, atol=0)


def fp4_lanes():
    """Each of 8 threads copies 32 float4_e2m1fn elements (16 bytes) one element per lane; B is S rotated by 64."""

    @T.prim_func
    def fp4_copy(A: T.Tensor((256,), "float4_e2m1fn"), B: T.Tensor((256,), "float4_e2m1fn")):
        with T.Kernel(1, threads=8):
            tx = T.get_thread_binding()
            S = T.alloc_shared((256,), "float4_e2m1fn")
            for v in T.vectorized(32):
                T.ptx_cp_async(T.access_ptr(S[tx * 32 + v], "w", 1), T.access_ptr(A[tx * 32 + v], "r", 1), 1)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            for i in T.Parallel(256):
                B[i] = S[(i + 64) % 256]

    return fp4_copy


@pytest.mark.parametrize("arch", ARCHS)
def test_sub_byte_lanes_fold_by_their_bits(arch, monkeypatch):
    """32 fp4 lanes are 16 bytes (the logical element count in bits, not one byte a lane); the fp4 tiles are byte
    tiles, so the copy moves bytes tx * 16 on."""
    kernel = tilelang.compile(fp4_lanes(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert _copy_calls(source) == ["tl::cp_async_gs<16>"]
    assert re.search(r"tl::cp_async_gs<16>\(&buf_dyn_shmem\[\(\(int\)threadIdx.x\) \* 16\], "
                     r"&A\[\(\(int\)threadIdx.x\) \* 16\]\)", source), source
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    a = torch.randint(0, 256, (128,), generator=torch.Generator().manual_seed(9), dtype=torch.int32).to(torch.uint8)
    b = torch.full((128,), 0xEE, dtype=torch.uint8)
    kernel(a, b)  # the fp4 tensors are passed as their bytes: element 2k in the low nibble of byte k
    torch.testing.assert_close(b, torch.roll(a, -32), rtol=0, atol=0)


def test_an_odd_fp4_element_has_no_address():
    @T.prim_func
    def odd(A: T.Tensor((256,), "float4_e2m1fn"), B: T.Tensor((256,), "float16")):
        with T.Kernel(1, threads=8):
            tx = T.get_thread_binding()
            S = T.alloc_shared((288,), "float4_e2m1fn")
            T.ptx_cp_async(T.access_ptr(S[tx * 8 + 1], "w"), T.access_ptr(A[tx * 8], "r"), 8)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            B[tx] = T.cast(S[tx], "float16")

    with pytest.raises(tilelang.CompileError, match=r"the address of `S\[.*\]`: an address into a float4_e2m1fn "
                                                    r"tensor must be of a provably even element"):
        tilelang.compile(odd, target="musa -arch=mp_31")



def int4_lanes(dtype: str):
    """Moore Threads' int4 kernel, run: 8 threads each copy 32 int4 lanes (16 bytes) into S; the block reads S's
    bytes (a uint8 view) rotated by 16 into B. int4 tensors are packed storage whose bytes only move (element 2k in
    the low nibble of byte k), passed as uint8 or int8 tensors of half the elements."""

    @T.prim_func
    def int4_copy(A: T.Tensor((256,), dtype), B: T.Tensor((128,), "uint8")):
        with T.Kernel(1, threads=8):
            tx = T.get_thread_binding()
            S = T.alloc_shared((256,), dtype)
            for v in T.vectorized(32):
                T.ptx_cp_async(T.access_ptr(S[tx * 32 + v], "w", 1), T.access_ptr(A[tx * 32 + v], "r", 1), 1)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            S_bytes = T.view(S, (128,), dtype="uint8")
            for i in T.Parallel(128):
                B[i] = S_bytes[(i + 16) % 128]

    return int4_copy


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["int4", "uint4"])
def test_int4_lanes_fold_into_16_byte_copies_of_the_packed_bytes(arch, dtype, monkeypatch):
    kernel = tilelang.compile(int4_lanes(dtype), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert _copy_calls(source) == ["tl::cp_async_gs<16>"]
    assert re.search(r"tl::cp_async_gs<16>\(&\w+\[\(\(int\)threadIdx.x\) \* 16\], &A\[\(\(int\)threadIdx.x\) \* 16\]\)",
                     source), source
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    gen = torch.Generator().manual_seed(11)
    a = torch.randint(-128, 128, (128,), generator=gen, dtype=torch.int32).to(torch.int8)  # upstream passes int8
    b = torch.full((128,), 0xEE, dtype=torch.uint8)
    kernel(a, b)
    torch.testing.assert_close(b, torch.roll(a.view(torch.uint8), -16), rtol=0, atol=0)
    kernel(a.view(torch.uint8), b)  # or their bytes as uint8
    torch.testing.assert_close(b, torch.roll(a.view(torch.uint8), -16), rtol=0, atol=0)


def test_int4_tile_elements_are_stored_by_t_fill():
    """(T.copy of int4 tiles, a copy of their bytes: test_int4_copy.py.)"""
    @T.prim_func
    def elements(A: T.Tensor((128,), "int4"), B: T.Tensor((128,), "int8")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((128,), "int4")
            T.fill(S, -3)  # element stores: nibbles (issue 38, test_int4_elements.py)
            T.sync_threads()
            for i in T.Parallel(128):
                B[i] = T.cast(S[i], "int8")

    b = torch.zeros(128, dtype=torch.int8)
    tilelang.compile(elements, target="musa -arch=mp_31")(torch.zeros(64, dtype=torch.uint8), b)
    assert torch.equal(b, torch.full((128,), -3, dtype=torch.int8))


@pytest.mark.parametrize("arch", ARCHS)
def test_folded_lanes_into_a_gemm_operand_write_the_swizzled_run(arch):
    """Rows of KV gathered by an index tensor into the gemm's B tile, 8 bfloat16 lanes of one element per copy: the
    fold is one 16-byte copy to the element's address under the tile's layout (mp_31's swizzle; checked contiguous
    in it by LowerSharedLayout), and C = A @ KV[idx]^T."""
    M, K, BN, ROWS = 64, 64, 64, 256

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
                for v in T.vectorized(8):
                    T.ptx_cp_async(T.access_ptr(B_s[r * 16 + tx // 8, tx % 8 * 8 + v], "w", 1),
                                   T.access_ptr(KV[row, tx % 8 * 8 + v], "r", 1), 1)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            T.clear(C_l)
            T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C)

    kernel = tilelang.compile(gather_gemm, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert _copy_calls(source) == ["tl::cp_async_gs<16>"]
    copy_line = next(line for line in source.splitlines() if "tl::cp_async_gs" in line)
    swizzled = re.search(r"tl::cp_async_gs<16>\(&B_s\[.* \^ .*\], &KV\[", copy_line)
    assert bool(swizzled) == (arch == "mp_31"), copy_line  # the mp_31 gemm's tile is swizzled; mp_22's row-major
    a, kv = rand((M, K), torch.bfloat16, 13), rand((ROWS, K), torch.bfloat16, 14)
    idx = torch.randperm(ROWS, generator=torch.Generator().manual_seed(15))[:BN].to(torch.int32)
    c = poison((M, BN), torch.float32)
    kernel(a, kv, idx, c)
    torch.testing.assert_close(c, a.float() @ kv[idx.long()].float().T, rtol=1e-3, atol=1e-3)
