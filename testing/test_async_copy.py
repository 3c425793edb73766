"""LDLMS asynchronous copies and robust descriptors: T.copy(..., force_async_copy=True) (completes by itself),
T.async_copy + T.ptx_wait_group (the user waits), T.copy(..., src_robust_desc=T.make_robust_desc(...)) alone and
with force_async_copy; printed as the tl:: templates of async_copy.h and run in the simulator against torch, with
their tails predicated (zero-filled pieces), and the guide's conditions as errors at the user's line."""

import functools
import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.launcher import KernelLaunchError

ARCHS = ["mp_31", "mp_22"]


def tiles_with_tail(M, N, block_m, dtype):
    """B = A through a shared tile copied with force_async_copy; M is not a multiple of block_m."""

    @T.prim_func
    def tiles(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_m), threads=64) as bx:
            S = T.alloc_shared((block_m, N), dtype)
            T.copy(A[bx * block_m, 0], S, force_async_copy=True)
            for i, j in T.Parallel(block_m, N):
                if bx * block_m + i < M:
                    B[bx * block_m + i, j] = S[i, j] + S[block_m - 1 - i, j] * 0
            # every row past the tensor reads as zero
            for i in T.Parallel(block_m):
                if bx * block_m + i >= M:
                    B[0, 0] = B[0, 0] + S[i, 0]

    return tiles


def ring(n_tiles, tile, dtype="float32"):
    """Two-slot ring: tile k + 1 is in flight (T.async_copy) while tile k is consumed after T.ptx_wait_group(1)."""

    @T.prim_func
    def ring_copy(A: T.Tensor((n_tiles * tile,), dtype), B: T.Tensor((n_tiles * tile,), dtype)):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((2, tile), dtype)
            T.async_copy(A[0:tile], S[0, :])
            for k in T.serial(n_tiles):
                if k + 1 < n_tiles:
                    T.async_copy(A[(k + 1) * tile:(k + 2) * tile], S[(k + 1) % 2, :])
                    T.ptx_wait_group(1)
                else:
                    T.ptx_wait_group(0)
                for i in T.Parallel(tile):
                    B[k * tile + i] = S[k % 2, i] * 3
                T.sync_threads()

    return ring_copy


def robust(n, force_async):
    """The guide's snippet: a descriptor of the 8 bytes from &src[1]; each thread copies src[tid] through it."""

    @T.prim_func
    def robust_copy(src: T.Tensor((n,), "float32"), out: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=n):
            tid = T.get_thread_binding()
            dst = T.alloc_shared((n,), "float32")
            robust_desc = T.make_robust_desc(T.address_of(src[1]), 8)
            T.copy(src[tid], dst[tid], src_robust_desc=robust_desc, force_async_copy=force_async)
            out[tid] = dst[tid]

    return robust_copy


def robust_tile(n, block):
    """A region copy through a descriptor of the first 10 elements."""

    @T.prim_func
    def robust_region(src: T.Tensor((n,), "float32"), out: T.Tensor((block,), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((block,), "float32")
            d = T.make_robust_desc(T.address_of(src[0]), 40)
            T.copy(src[0:block], S, src_robust_desc=d)
            T.copy(S, out)

    return robust_region


@functools.lru_cache(maxsize=None)
def compiled(kind: str, arch: str):
    target = f"musa -arch={arch}"
    if kind == "tiles":
        return tilelang.compile(tiles_with_tail(100, 64, 32, "float16"), target=target)
    if kind == "ring":
        return tilelang.compile(ring(3, 128), target=target)
    if kind == "robust":
        return tilelang.compile(robust(32, False), target=target)
    if kind == "robust_async":
        return tilelang.compile(robust(32, True), target=target)
    if kind == "robust_region_unpredicated":
        return tilelang.compile(robust_tile(32, 32), target=target,
                                pass_configs={tilelang.PassConfigKey.TL_DISABLE_SAFE_ROBUST_COPY_PREDICATION: True})
    raise KeyError(kind)


@pytest.mark.parametrize("arch", ARCHS)
def test_force_async_copy_tiles_with_a_tail(arch):
    kernel = compiled("tiles", arch)
    source = kernel.get_kernel_source()
    # float16 rows of 64: 16-byte pieces, the rows past M = 100 zero-filled
    assert "tl::cp_async_gs_conditional<16>(&S[" in source and ") < 100);" in source
    assert source.index("tl::cp_async_commit();") < source.index("tl::cp_async_wait<0>();") \
        < source.index("__syncthreads();")
    a = rand((100, 64), torch.float16, 11)
    b = poison((100, 64), torch.float16)
    kernel(a, b)
    expected = a.clone()
    expected[0, 0] = a[0, 0]  # the 28 rows past the tensor add zeros
    torch.testing.assert_close(b, expected)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_tensor_read_by_async_pieces_must_be_aligned_as_they_are(arch):
    """The launcher knows the 16-byte LDLMS pieces read A by address: a view 2 bytes into a buffer is refused
    with its reason, not run into the hardware's (or the simulator's) misaligned access."""
    kernel = compiled("tiles", arch)
    assert next(p for p in kernel.params if p.name == "A").align == 16
    shifted = rand((100 * 64 + 1,), torch.float16, 12)[1:].view(100, 64)
    with pytest.raises(ValueError, match="A is read or written 16 bytes at a time"):
        kernel(shifted, poison((100, 64), torch.float16))


def test_async_copy_ring_waits_for_one_group_at_a_time():
    kernel = compiled("ring", "mp_31")
    source = kernel.get_kernel_source()
    assert source.count("tl::cp_async_commit();") == 2 and "tl::cp_async_wait<1>();" in source
    assert "tl::cp_async_gs<16>(" in source
    a, b = rand((3 * 128,), torch.float32, 12), poison((3 * 128,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a * 3)


def laid_out_async_copy(rows=8, cols=64, vec=8):
    """T.async_copy(..., loop_layout=F) with upstream's thread assignment of the copy loop (thread i * 8 + j // 8
    copies row i's vector j // 8), then reads across the threads after the wait (TileKernels' engram gate)."""
    layout = T.Fragment((rows, cols), forward_fn=lambda i, j: (i * (cols // vec) + j // vec, j % vec))

    @T.prim_func
    def main(A: T.Tensor((2, rows, cols), "bfloat16"), B: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1, threads=rows * cols // vec):
            S = T.alloc_shared((rows, cols), "bfloat16")
            T.async_copy(A[1, :, :], S, loop_layout=layout)
            T.ptx_wait_group(0)
            for i, j in T.Parallel(rows, cols):
                B[i, j] = T.cast(S[rows - 1 - i, cols - 1 - j], "float32") * 2

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_async_copy_takes_a_loop_layout(arch):
    kernel = tilelang.compile(laid_out_async_copy(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl::cp_async_gs<16>(" in source and "tl::cp_async_commit();" in source
    a, b = rand((2, 8, 64), torch.bfloat16, 21), poison((8, 64), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a[1].flip(0).flip(1).float() * 2)


def test_async_copy_annotations_and_a_wrong_loop_layout():
    layout = T.Fragment((8, 64), forward_fn=lambda i, j: (i * 8 + j // 8, j % 8))

    def program(**options):
        @T.prim_func
        def main(A: T.Tensor((8, 64), "float32"), B: T.Tensor((8, 64), "float32")):
            with T.Kernel(1, threads=64):
                S = T.alloc_shared((8, 64), "float32")
                T.async_copy(A, S, **options)
                T.ptx_wait_group(0)
                T.copy(S, B)

        return main

    kernel = tilelang.compile(program(annotations={"parallel_loop_layout": layout}), target="musa -arch=mp_31")
    a, b = rand((8, 64), torch.float32, 22), poison((8, 64), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a)
    with pytest.raises(Exception, match="T.async_copy: loop_layout must be a T.Fragment"):
        program(loop_layout="by rows")
    with pytest.raises(Exception, match=r"T.async_copy: unknown annotation\(s\) \['disable_tma'\]"):
        program(annotations={"disable_tma": True})


def owned_pieces_ring(rounds=3, rows=4, cols=64, run=4):
    """Each round copies A[r] into S by `loop_layout=F` (thread i * 16 + j // 4 copies row i's columns j // 4 * 4
    .. + 4) and each thread reads back only its own elements; with TL_DISABLE_THREAD_STORAGE_SYNC nothing orders
    one thread's reads before another thread's next copy, so the copy must go where F puts it."""
    threads = rows * cols // run
    layout = T.Fragment((rows, cols), forward_fn=lambda i, j: (i * (cols // run) + j // run, j % run))

    @T.prim_func
    def main(A: T.Tensor((rounds, rows, cols), "bfloat16"), B: T.Tensor((rounds, rows, cols), "float32")):
        with T.Kernel(1, threads=threads):
            S = T.alloc_shared((rows, cols), "bfloat16")
            tid = T.get_thread_binding()
            for r in T.serial(rounds):
                T.async_copy(A[r, :, :], S, loop_layout=layout)
                T.ptx_wait_group(0)
                for v in T.vectorized(run):
                    B[r, tid // (cols // run), tid % (cols // run) * run + v] = \
                        T.cast(S[tid // (cols // run), tid % (cols // run) * run + v], "float32") + 1

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_async_copy_pieces_follow_the_loop_layout(arch, monkeypatch):
    """Upstream's T.async_copy runs its copy loop by loop_layout=F: a piece is copied by the thread F gives it and
    is no wider than F's runs of one thread's elements (4 bfloat16 here: 8-byte pieces, not 16)."""
    kernel = tilelang.compile(owned_pieces_ring(), target=f"musa -arch={arch}",
                              pass_configs={tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True})
    source = kernel.get_kernel_source()
    assert re.search(r"tl::cp_async_gs(_conditional)?<8>\(&S\[\(\(int\)threadIdx.x\) \* 4\]", source)
    assert "<16>(" not in source
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")  # a piece another thread copies would race with the reads
    a, b = rand((3, 4, 64), torch.bfloat16, 23), poison((3, 4, 64), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.float() + 1)


def test_async_copy_loop_layout_of_other_extents_is_an_error():
    layout = T.Fragment((4, 32), forward_fn=lambda i, j: (i * 8 + j // 4, j % 4))

    @T.prim_func
    def main(A: T.Tensor((4, 64), "float32"), B: T.Tensor((4, 64), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4, 64), "float32")
            T.async_copy(A, S, loop_layout=layout)
            T.ptx_wait_group(0)
            T.copy(S, B)

    with pytest.raises(Exception, match=r"T.async_copy: loop_layout .* has input shape \[4, 32\], but the copy's "
                                        r"extents are \['4', '64'\]"):
        tilelang.compile(main, target="musa -arch=mp_31")


def test_a_missing_wait_after_async_copy_is_named_in_checked_mode(monkeypatch):
    @T.prim_func
    def no_wait(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((128,), "float32")
            T.async_copy(A, S)
            T.sync_threads()
            T.copy(S, B)

    kernel = tilelang.compile(no_wait, target="musa -arch=mp_31")
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    line = next(n for n, text in enumerate(kernel.get_kernel_source().splitlines(), 1) if "tl::cp_async_gs" in text)
    with pytest.raises(KernelLaunchError, match=rf"never waited for, the first \(__musa_memcpy_g2s\) issued at "
                                                rf"no_wait.checked.mu:{line}"):
        kernel(rand((128,), torch.float32, 1), poison((128,), torch.float32))


@pytest.mark.parametrize("arch,force_async", [("mp_31", True), ("mp_22", False)])
def test_robust_copy_reads_zeros_outside_the_descriptor(arch, force_async):
    kernel = compiled("robust_async" if force_async else "robust", arch)
    source = kernel.get_kernel_source()
    assert "const tl::RobustDesc robust_desc = tl::make_robust_desc((&src[1]), 8" in source or \
        "const tl::RobustDesc robust_desc = tl::make_robust_desc(&src[1], 8" in source
    template = "tl::cp_async_gs_robust<4>(" if force_async else "tl::robust_copy<4>("
    assert template in source and ", robust_desc" in source
    src, out = rand((32,), torch.float32, 13), poison((32,), torch.float32)
    kernel(src, out)
    expected = torch.zeros(32)
    expected[1:3] = src[1:3]
    torch.testing.assert_close(out, expected)


def test_robust_copy_without_its_tail_predicate():
    """TL_DISABLE_SAFE_ROBUST_COPY_PREDICATION: no bounds predicate, the descriptor alone guards the reads (the
    elements past its 10 read as zero)."""
    kernel = compiled("robust_region_unpredicated", "mp_31")
    source = kernel.get_kernel_source()
    assert "tl::robust_copy<16>(&S[" in source and ", d);" in source
    src, out = rand((32,), torch.float32, 14), poison((32,), torch.float32)
    kernel(src, out)
    expected = torch.zeros(32)
    expected[:10] = src[:10]
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("arch", ARCHS)
def test_robust_load_into_a_thread_private_buffer_runs_on_every_thread(arch):
    """`T.copy(src[tid], local, src_robust_desc=d)`: the destination is each thread's own, so every thread loads
    (a tile copy's thread split would leave threads 1..n-1 with an unwritten register)."""

    @T.prim_func
    def robust_to_local(src: T.Tensor((64,), "float32"), out: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tid = T.get_thread_binding()
            r = T.alloc_local([1], "float32")
            d = T.make_robust_desc(T.address_of(src[1]), 8)
            T.copy(src[tid], r, src_robust_desc=d)
            out[tid] = r[0] * 2

    kernel = tilelang.compile(robust_to_local, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl::robust_copy<4>(&r[0], &src[(int)threadIdx.x], d);" in source, source  # tid < 64: in bounds
    assert "threadIdx.x) < 1" not in source
    src, out = rand((64,), torch.float32, 15), poison((64,), torch.float32)
    kernel(src, out)
    expected = torch.zeros(64)
    expected[1:3] = src[1:3] * 2
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("threads", [4, 8])
def test_a_per_thread_copy_the_threads_keep_in_bounds_has_no_predicate(threads):
    """`T.copy(src[tid], S[tid], ...)` with as many threads as src has elements: tid < 4 holds on every thread, so
    the copy needs no in-bounds predicate (the `_conditional` form); with 8 threads it keeps one."""

    @T.prim_func
    def per_thread(src: T.Tensor((4,), "float32"), out: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=threads):
            tid = T.get_thread_binding()
            S = T.alloc_shared((threads,), "float32")
            d = T.make_robust_desc(T.address_of(src[1]), 8)
            T.copy(src[tid], S[tid], force_async_copy=True, src_robust_desc=d)
            if tid < 4:
                out[tid] = S[tid]

    kernel = tilelang.compile(per_thread, target="musa -arch=mp_31")
    source = kernel.get_kernel_source()
    if threads == 4:
        assert "tl::cp_async_gs_robust<4>(&S[(int)threadIdx.x], &src[(int)threadIdx.x], d);" in source, source
    else:
        assert "tl::cp_async_gs_robust_conditional<4>(" in source and "((int)threadIdx.x) < 4);" in source, source
    src, out = rand((4,), torch.float32, 16), poison((4,), torch.float32)
    kernel(src, out)
    torch.testing.assert_close(out, torch.tensor([0.0, src[1], src[2], 0.0]))


def _check(build):
    with pytest.raises(tilelang.CompileError) as info:
        build()
    return str(info.value)


@pytest.mark.parametrize("arch", ARCHS)
def test_strided_column_copies_take_one_element_pieces(arch):
    """A column `g[t0:t1, h]` of a float32 tensor is not contiguous, but each 4-byte element is a piece: copied
    asynchronously (the rows past the tensor zero-filled) and through a robust descriptor of the sequence's rows."""
    T_, H, S = 100, 3, 64

    @T.prim_func
    def columns(G: T.Tensor((T_, H), "float32"), B: T.Tensor((2, H, T_), "float32")):
        with T.Kernel(T.ceildiv(T_, S), H, threads=64) as (bx, h):
            A_s = T.alloc_shared((S,), "float32")
            R_s = T.alloc_shared((S,), "float32")
            desc = T.make_robust_desc(T.address_of(G[0, 0]), T_ * H * 4)
            T.copy(G[bx * S:bx * S + S, h], A_s, force_async_copy=True)
            T.copy(G[bx * S:bx * S + S, h], R_s, src_robust_desc=desc)
            for i in T.Parallel(S):
                if bx * S + i < T_:
                    B[0, h, bx * S + i] = A_s[i] + A_s[S - 1 - i] * 0
                    B[1, h, bx * S + i] = R_s[i]

    for target_arch in ARCHS:
        source = tilelang.compile(columns, target=f"musa -arch={target_arch}").get_kernel_source()
        assert "tl::cp_async_gs_conditional<4>(" in source and "tl::robust_copy<4>(" in source, source
    kernel = tilelang.compile(columns, target=f"musa -arch={arch}")
    g, b = rand((T_, H), torch.float32, 71), poison((2, H, T_), torch.float32)
    kernel(g, b)
    torch.testing.assert_close(b[0], g.T)
    torch.testing.assert_close(b[1], g.T)


def test_async_copy_conditions_are_errors_at_the_line():
    def from_shared():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                S = T.alloc_shared((64,), "float32")
                R = T.alloc_shared((64,), "float32")
                T.copy(S, R, force_async_copy=True)

    message = _check(from_shared)
    assert "T.copy(S, R, force_async_copy=True)" in message
    assert "an asynchronous (LDLMS) copy reads global memory; the source `S` is shared.dyn" in message

    def two_byte_pieces():
        @T.prim_func
        def k(A: T.Tensor((64, 65), "float16"), B: T.Tensor((64,), "float16")):
            with T.Kernel(1, threads=64):
                S = T.alloc_shared((64,), "float16")
                T.copy(A[0:64, 3], S, force_async_copy=True)
                T.copy(S, B)

        tilelang.compile(k, target="musa -arch=mp_31")

    message = _check(two_byte_pieces)
    assert "force_async_copy=True" in message and "not contiguous along the copy's innermost dimension" in message

    def odd_elements():
        @T.prim_func
        def k(A: T.Tensor((64,), "float16"), B: T.Tensor((64,), "float16")):
            with T.Kernel(1, threads=64):
                tx = T.get_thread_binding()
                S = T.alloc_shared((64,), "float16")
                T.copy(A[tx], S[tx], force_async_copy=True)
                B[tx] = S[tx]

        tilelang.compile(k, target="musa -arch=mp_31")

    message = _check(odd_elements)
    assert "T.copy(A[tx], S[tx], force_async_copy=True)" in message
    assert "cannot be cut into 4/8/16-byte pieces" in message and "2 bytes an element" in message

    def cast():
        @T.prim_func
        def k(A: T.Tensor((64,), "float16")):
            with T.Kernel(1, threads=64):
                S = T.alloc_shared((64,), "float32")
                T.copy(A, S, force_async_copy=True)

    assert "source `A` is float16 but destination `S` is float32" in _check(cast)

    def policies():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                S = T.alloc_shared((64,), "float32")
                T.copy(A, S, force_async_copy=True, eviction_policy="evict_first", inner_cache_policy="cache_once")

    assert "eviction_policy cannot be combined with inner_cache_policy/outer_cache_policy" in _check(policies)

    def wait_group():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                T.ptx_wait_group(-1)

    assert "T.ptx_wait_group: num must be a non-negative int" in _check(wait_group)

    def bad_desc():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                S = T.alloc_shared((64,), "float32")
                d = T.make_robust_desc(T.address_of(S[0]), 8)

    assert "T.make_robust_desc: addr must be the address of a global tensor element" in _check(bad_desc)


def test_the_guides_vectorized_element_copies():
    """The guide's `for v in T.vectorized(n): T.copy(src_global[v], dst_shared[v], force_async_copy=True)`: the
    lanes of each thread form one piece (FuseAsyncCopyLanes): 8 float16 lanes, one 16-byte copy; lanes that are not
    contiguous stay element copies."""
    from test_async_barrier import _lower

    @T.prim_func
    def guide(src_global: T.Tensor((512,), "float16"), out: T.Tensor((512,), "float16")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            dst_shared = T.alloc_shared((512,), "float16")
            for v in T.vectorized(8):
                T.copy(src_global[tx * 8 + v], dst_shared[tx * 8 + v], force_async_copy=True)
            out[tx] = dst_shared[511 - tx]

    source = _lower(guide)
    assert "tl::cp_async_gs<16>(&dst_shared[((int)threadIdx.x) * 8], &src_global[((int)threadIdx.x) * 8]" in source
    assert source.index("tl::cp_async_wait<0>();") < source.index("__syncthreads();") < source.index("out[")

    @T.prim_func
    def strided(src_global: T.Tensor((512,), "float32"), out: T.Tensor((512,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            dst_shared = T.alloc_shared((512,), "float32")
            for v in T.vectorized(4):
                T.copy(src_global[v * 64 + tx], dst_shared[tx * 4 + v], force_async_copy=True)
            out[tx] = dst_shared[511 - tx]

    assert "tl::cp_async_gs_conditional<4>(&dst_shared[" in _lower(strided)


def test_mp21_has_no_ldlms_copies():
    from test_async_barrier import _lower

    @T.prim_func
    def on_mp21(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((64,), "float32")
            T.copy(A, S, force_async_copy=True)
            A[0] = S[1]

    with pytest.raises(tilelang.CompileError, match=r"T.copy\(A, S, force_async_copy=True\)(.|\n)*T.copy: mp_21 has "
                                                    r"no asynchronous \(LDLMS\) copies \(mp_22 and later\)"):
        _lower(on_mp21, "mp_21")
