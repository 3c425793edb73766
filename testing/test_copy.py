"""T.copy / T.fill / T.clear between global and shared memory (with tails), and T.use_swizzle, in the
simulator against torch."""

import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_musa.diagnostics import TileLangWarning
from conftest import poison, rand


def tile_roundtrip(M, N, BM, BN, src_dtype, dst_dtype, threads=128):
    @T.prim_func
    def roundtrip(A: T.Tensor((M, N), src_dtype), B: T.Tensor((M, N), dst_dtype)):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=threads) as (bx, by):
            S = T.alloc_shared((BM, BN), src_dtype)
            T.clear(S)
            T.copy(A[by * BM, bx * BN], S)
            T.copy(S, B[by * BM, bx * BN])

    return roundtrip


ROUNDTRIP_SIZES = [(256, 128), (200, 136), (37, 5)]  # whole tiles; tails, 16-byte rows; tails, odd rows
ROUNDTRIP_DTYPES = [("float16", "float32"), ("float32", "float32"), ("bfloat16", "bfloat16")]


# Every size with every dtype pair, and each size and each dtype pair on both arches (the arches alternate over the
# grid): every pair of the three choices is tested, not all 18 triples (each ~1 s of build).
@pytest.mark.parametrize("M,N,dtypes,arch", [
    pytest.param(*size, dtypes, arch, id=f"{size[0]}x{size[1]}-{dtypes[0]}-{dtypes[1]}-{arch}")
    for i, size in enumerate(ROUNDTRIP_SIZES) for j, dtypes in enumerate(ROUNDTRIP_DTYPES)
    for arch in [["mp_31", "mp_22"][(i + j) % 2]]])
def test_global_shared_global_roundtrip_with_tails(arch, M, N, dtypes):
    kernel = tilelang.compile(tile_roundtrip(M, N, 64, 32, *dtypes), target=f"musa -arch={arch}")
    src = kernel.get_device_source()
    assert "buf_dyn_shmem" in src and "__syncthreads" in src
    if N % 8 == 0 and dtypes[0] == "float16":
        assert "tl::vec<half_t, 8>" in src  # 128-bit loads where the layout allows
    a = rand((M, N), getattr(torch, dtypes[0]), 1)
    b = torch.full((M, N), float("nan"), dtype=getattr(torch, dtypes[1]))
    kernel(a, b)
    torch.testing.assert_close(b, a.to(b.dtype))


def test_tail_guards_can_be_disabled():
    program = tile_roundtrip(200, 136, 64, 32, "float32", "float32")  # the source is the check: lowered, not built
    guarded = tilelang.lower(program, target="musa").kernel_source
    assert "< 200" in guarded
    unguarded = tilelang.lower(
        program, target="musa", pass_configs={tilelang.PassConfigKey.TL_DISABLE_SAFE_COPY_PREDICATION: True}
    ).kernel_source
    assert "< 200" not in unguarded


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_copies_stay_predicated_without_safe_memory_access(arch):
    """TL_DISABLE_SAFE_MEMORY_ACCESS drops the guards of plain element accesses only: a T.copy keeps its tail
    predicate (as upstream's copies do unless TL_DISABLE_SAFE_COPY_PREDICATION)."""
    M, N, BM = 200, 32, 64

    def program(element_store):
        @T.prim_func
        def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M,), "float32")):
            with T.Kernel(T.ceildiv(M, BM), threads=128) as bx:
                S = T.alloc_shared((BM, N), "float32")
                T.copy(A[bx * BM, 0], S)
                for i, j in T.Parallel(BM, N):
                    S[i, j] = S[i, j] + 1.0
                T.copy(S, B[bx * BM, 0], disable_tma=True)
                if element_store:
                    tx = T.get_thread_binding()
                    if tx < BM:
                        C[bx * BM + tx] = S[tx, 0]  # past C for the last block: the user's responsibility

        return main

    configs = {tilelang.PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS: True}
    unguarded = tilelang.compile(program(True), target=f"musa -arch={arch}", pass_configs=configs)
    source = unguarded.get_kernel_source()
    assert "(((int)threadIdx.x) < 64) {\n    C[" in source, source  # only the user's own condition
    kernel = tilelang.compile(program(False), target=f"musa -arch={arch}", pass_configs=configs)
    source = kernel.get_kernel_source()
    assert source.count("< 200)") >= 2, source  # the load's and the store's row guards
    a, b = rand((M, N), torch.float32, 91), poison((M, N), torch.float32)
    kernel(a, b, poison((M,), torch.float32))
    torch.testing.assert_close(b, a + 1)


def test_safe_memory_access_guards_only_copies_when_disabled():
    """The pass itself: under TL_DISABLE_SAFE_MEMORY_ACCESS (copies_only) a SAFE_COPY region's accesses get their
    guards and the marker is dropped; a plain store outside it stays unguarded. Enabled, both are guarded."""
    import tvm
    from tvm import tirx
    from tvm.tirx.script import builder as Tb
    from tilelang_musa.ir.attrs import SAFE_COPY
    from tilelang_musa.transform.safe_memory_access import safe_memory_access

    tx = tvm.ir.expr.Var("tx", "int32")
    a = Tb.buffer([100], "float32", scope="global")
    b = Tb.buffer([100], "float32", scope="global")
    s = Tb.buffer([128], "float32", scope="shared")

    def func(copy, plain):
        iv = tirx.IterVar(tvm.ir.Range(0, 128), tx, 1, "threadIdx.x")
        return tirx.PrimFunc([], tirx.AttrStmt(iv, "thread_extent", 128, tirx.SeqStmt([copy, plain])))

    copy = tirx.BufferStore(s, a[tx], [tx])
    plain = tirx.BufferStore(b, s[tx], [tx])
    marked = tirx.AttrStmt(s, SAFE_COPY, tirx.const(1, "int32"), copy)
    guarded_copy = tirx.BufferStore(s, tirx.if_then_else(tx < 100, a[tx], tirx.const(0.0, "float32")), [tx])
    guarded_plain = tirx.IfThenElse(tx < 100, plain, None)
    tvm.ir.assert_structural_equal(safe_memory_access(func(marked, plain), copies_only=True).body,
                                   func(guarded_copy, plain).body)
    tvm.ir.assert_structural_equal(safe_memory_access(func(marked, plain)).body,
                                   func(guarded_copy, guarded_plain).body)


def test_copy_slices_and_fill_value():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((32, 16), "float32")
            T.fill(S, 2.5)
            T.copy(A[8:40, 16:32], S)
            T.fill(B[0:64, 0:64], -1)
            T.copy(S[0:16, 0:16], B[48:64, 0:16])

    kernel = tilelang.compile(k)
    a = rand((64, 64), torch.float32, 2)
    b = torch.full((64, 64), float("nan"))
    kernel(a, b)
    expected = torch.full((64, 64), -1.0)
    expected[48:64, 0:16] = a[8:24, 16:32]
    torch.testing.assert_close(b, expected)


def test_copy_dimension_mismatch_names_both_operands():
    with pytest.raises(tilelang.CompileError, match=r"T.copy: A \(16, 16\) and S \(256\) have different numbers"):
        @T.prim_func
        def k(A: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128):
                S = T.alloc_shared((256,), "float32")
                T.copy(A[0:16, 0:16], S)


def test_copy_takes_no_barrier():
    with pytest.raises(tilelang.CompileError, match="T.copy takes no `barrier=`: T.copy completes by itself"):
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                S = T.alloc_shared((64,), "float32")
                T.copy(A, S, barrier=None)


@pytest.mark.parametrize("order", ["row", "col"])
def test_use_swizzle_is_a_bijection_over_the_grid(order):
    M, N, BM, BN = 300, 160, 32, 32

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), O: T.Tensor((10, 5), "int32")):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=128) as (bx, by):
            T.use_swizzle(panel_size=4, order=order)
            S = T.alloc_shared((BM, BN), "float32")
            T.copy(A[by * BM, bx * BN], S)
            T.copy(S, B[by * BM, bx * BN])
            if T.get_thread_binding() == 0:
                O[by, bx] = by * 5 + bx

    kernel = tilelang.compile(k)
    assert "tl::min(4, " in kernel.get_device_source()  # the panel's length: the block indices are remapped
    a = rand((M, N), torch.float32, 3)
    b = torch.full((M, N), float("nan"))
    o = torch.full((10, 5), -1, dtype=torch.int32)
    kernel(a, b, o)
    torch.testing.assert_close(b, a)
    assert o.flatten().tolist() == list(range(50))  # every block ran exactly one tile


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_use_swizzle_on_a_grid_of_run_time_size(arch):
    """A symbolic M: the panels are cut from the run-time grid height; every block still runs one tile."""
    M, N, BM, BN = T.dynamic("M"), 96, 32, 32

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), O: T.Tensor((T.ceildiv(M, BM), 3), "int32")):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=128) as (bx, by):
            T.use_swizzle(panel_size=4)
            S = T.alloc_shared((BM, BN), "float32")
            T.copy(A[by * BM, bx * BN], S)
            T.copy(S, B[by * BM, bx * BN])
            if T.get_thread_binding() == 0:
                O[by, bx] = by * 3 + bx

    kernel = tilelang.compile(k, target=f"musa -arch={arch}")
    assert "tl::min(4, " in kernel.get_kernel_source()  # the last panel's length, from the run-time grid
    for rows in (200, 96):
        a, b = rand((rows, N), torch.float32, rows), poison((rows, N), torch.float32)
        blocks = (rows + BM - 1) // BM
        o = torch.full((blocks, 3), -1, dtype=torch.int32)
        kernel(a, b, o)
        torch.testing.assert_close(b, a)
        assert o.flatten().tolist() == list(range(blocks * 3))


@pytest.mark.parametrize("k_major", [True, False])
def test_sqmma_swizzled_shared_tile_roundtrip(k_major):
    """A shared tile stored with the SQMMA swizzle: copies in and out are still exact, the stores are swizzled,
    and 128-bit accesses survive (the swizzle moves whole 16-byte pieces)."""
    import tilelang.layout

    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 64), "float16")
            T.annotate_layout({S: tilelang.layout.make_sqmma_swizzled_layout(S, k_major=k_major)})
            T.copy(A, S)
            T.copy(S, B)

    kernel = tilelang.compile(k)
    src = kernel.get_device_source()
    assert "^" in src  # the xor swizzle of the store/load addresses
    assert "tl::vec<half_t, 8>" in src
    a = rand((64, 64), torch.float16, 20)
    b = torch.full((64, 64), float("nan"), dtype=torch.float16)
    kernel(a, b)
    torch.testing.assert_close(b, a)


def test_annotated_fragment_layout_is_used_and_conflicts_are_reported():
    @T.prim_func
    def k(A: T.Tensor((32, 4), "float32"), B: T.Tensor((32, 4), "float32")):
        with T.Kernel(1, threads=32):
            F = T.alloc_fragment((32, 4), "float32")
            T.annotate_layout({F: T.Fragment((32, 4), forward_thread_fn=lambda i, j: i, forward_index_fn=lambda i, j: j)})
            T.copy(A, F)
            for i, j in T.Parallel(32, 4):
                F[i, j] = F[i, j] + 1.0
            T.copy(F, B)

    kernel = tilelang.compile(k)
    a = rand((32, 4), torch.float32, 21)
    b = torch.full((32, 4), float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, a + 1)

    # A loop over two fragments annotated with layouts that disagree: G is exchanged through shared memory
    # into the layout the loop runs in (F's), with a warning naming it.
    @T.prim_func
    def disagree(A: T.Tensor((32, 4), "float32"), B: T.Tensor((32, 4), "float32")):
        with T.Kernel(1, threads=32):
            F = T.alloc_fragment((32, 4), "float32")
            G = T.alloc_fragment((32, 4), "float32")
            T.annotate_layout({F: T.Fragment((32, 4), forward_thread_fn=lambda i, j: i, forward_index_fn=lambda i, j: j),
                               G: T.Fragment((32, 4), forward_thread_fn=lambda i, j: 31 - i,
                                             forward_index_fn=lambda i, j: j)})
            T.copy(A, F)
            T.copy(A, G)
            for i, j in T.Parallel(32, 4):
                F[i, j] = F[i, j] * G[i, j]
            T.copy(F, B)

    with pytest.warns(TileLangWarning, match=r"fragment `G` is exchanged through a 512-byte shared-memory tile"):
        kernel = tilelang.compile(disagree)
    assert "G_exchange" in kernel.get_kernel_source()
    b = torch.full((32, 4), float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, a * a)

    # Two layouts required of one fragment (an annotation and a gemm accumulator) cannot both hold: an error.
    @T.prim_func
    def conflict(A: T.Tensor((32, 32), "float16"), C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((32, 32), "float16")
            acc = T.alloc_fragment((32, 32), "float32")
            T.annotate_layout({acc: T.Fragment((32, 32), forward_thread_fn=lambda i, j: i * 4 + j // 8,
                                               forward_index_fn=lambda i, j: j % 8)})
            T.copy(A, A_s)
            T.clear(acc)
            T.gemm(A_s, A_s, acc)
            T.copy(acc, C)

    with pytest.raises(tilelang.CompileError, match=r"layout conflict on `acc`") as info:
        tilelang.compile(conflict, target="musa -arch=mp_31")
    assert "T.gemm(A_s, A_s, acc)" in str(info.value)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_copies_between_every_scope_pair(arch):
    """global -> shared -> fragment -> shared -> local -> global, with a dtype change on the way."""
    M, N = 32, 48

    @T.prim_func
    def k(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((M, N), "float16")
            F = T.alloc_fragment((M, N), "float32")
            S2 = T.alloc_shared((M, N), "float32")
            L = T.alloc_local((N,), "float32")
            T.copy(A, S)
            T.copy(S, F)
            for i, j in T.Parallel(M, N):
                F[i, j] = F[i, j] * 2.0
            T.copy(F, S2)
            tx = T.get_thread_binding()
            if tx < M:
                T.copy(S2[tx, 0:N], L)
                T.copy(L, B[tx, 0:N])

    kernel = tilelang.compile(k, target=f"musa -arch={arch}")
    a = rand((M, N), torch.float16, 22)
    b = torch.full((M, N), float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, a.float() * 2)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_copy_of_a_run_time_slice_into_a_fixed_tile_copies_the_slice(arch):
    # `T.copy(x[0:n], tile)` with n known at launch and a 1024-element tile: the copy covers min(n, 1024).
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((1024,), "float32")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((1024,), "float32")
            T.fill(tile, -1.0)
            T.copy(X[0:n], tile)
            T.copy(tile, Y)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    x, y = rand((300,), torch.float32, 31), poison((1024,), torch.float32)
    kernel(x, y)
    torch.testing.assert_close(y[:300], x)
    assert (y[300:] == -1.0).all()


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_copy_of_a_run_time_slice_into_a_fragment_loops_over_the_fragment(arch):
    # `T.copy(x[: n - 1], frag)` / `T.copy(frag, y[1:])`: a fragment's loop needs a constant extent, so the copy
    # walks the fragment's 8 elements, each guarded by the run-time extent (elements past it are not touched).
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32):
            frag = T.alloc_fragment((8,), "float32")
            T.fill(frag, -1.0)
            T.copy(X[: n - 1], frag)
            for i in T.Parallel(8):
                frag[i] = frag[i] * 2.0
            Y[0] = 5.0
            T.copy(frag, Y[1:])

    for target_arch in ("mp_31", "mp_22"):
        source = tilelang.compile(main, target=f"musa -arch={target_arch}").get_kernel_source()
        assert "< (n - 1)" in source or "< n - 1" in source or "+ 1) < n" in source, source
    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    for size in (6, 9, 30):
        x, y = rand((size,), torch.float32, size), poison((size,), torch.float32)
        kernel(x, y)
        m = min(size - 1, 8)
        torch.testing.assert_close(y[1:m + 1], x[:m] * 2)
        assert y[0] == 5.0 and torch.isnan(y[m + 1:]).all()


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_copy_of_a_run_time_slice_into_a_one_element_fragment(arch):
    # Moore Threads' GDN chunk offsets for one sequence (block_size = next_power_of_2(1) = 1): `cu_seqlens[: n - 1]`
    # has a run-time extent, the fragment one element. The run-time extent pairs with the unit dimension (upstream's
    # tail alignment), so the copy covers min(n - 1, 1) elements, inside both regions for every n; before, the
    # differing numbers of non-unit dimensions were rejected.
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), "int32"), Y: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=32):
            start = T.alloc_fragment((1,), "int32")
            end = T.alloc_fragment((1,), "int32")
            T.fill(start, -1)
            T.fill(end, -1)
            T.copy(X[: n - 1], start)
            T.copy(X[1:], end)
            for i in T.Parallel(1):
                end[i] = end[i] * 100 + start[i]
            Y[0] = 5
            T.copy(end, Y[1:])

    for target_arch in ("mp_31", "mp_22"):
        source = tilelang.compile(main, target=f"musa -arch={target_arch}").get_kernel_source()
        assert source.count("+ 1) < n)") == 3, source  # both loads and the store guarded by the run-time extent
    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    for size in (1, 2, 5):
        x = torch.randint(1, 50, (size,), dtype=torch.int32)
        y = torch.full((size,), -77, dtype=torch.int32)
        kernel(x, y)
        assert y[0] == 5
        if size >= 2:  # one element copied each way: y[1] = x[1] * 100 + x[0]
            assert y[1] == x[1] * 100 + x[0]
            assert (y[2:] == -77).all()


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_copy_of_a_constant_region_into_a_one_element_fragment_is_an_error(arch):
    # A constant extent of 4 against one element would leave three elements out: still rejected, at the line.
    with pytest.raises(tilelang.CompileError, match="different numbers of non-unit dimensions") as info:
        @T.prim_func
        def main(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32):
                frag = T.alloc_fragment((1,), "float32")
                T.copy(X[0:4], frag)  # the mismatched copy
                T.copy(frag, Y[0:1])

        tilelang.compile(main, target=f"musa -arch={arch}")
    assert "# the mismatched copy" in str(info.value)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_annotate_safe_value_is_what_out_of_bounds_reads_return(arch):
    # A window shifted up by 10 rows: the rows above the tensor read the annotated pad value, not zero.
    M, N, BM = 64, 32, 32

    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(M // BM, threads=128) as by:
            tile = T.alloc_shared((BM, N), "float16")
            T.annotate_safe_value({A: 10})
            for i, j in T.Parallel(BM, N):
                tile[i, j] = A[by * BM + i - 10, j]
            T.copy(tile, B[by * BM, 0])

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "1.000000e+01" in kernel.get_kernel_source()
    a, b = rand((M, N), torch.float16, 32), poison((M, N), torch.float16)
    kernel(a, b)
    expected = torch.cat([torch.full((10, N), 10.0, dtype=torch.float16), a[:-10]])
    torch.testing.assert_close(b, expected)
    with pytest.raises(tilelang.CompileError, match="must be a global tensor"):
        @T.prim_func
        def bad(A: T.Tensor((M, N), "float16")):
            with T.Kernel(1, threads=128):
                tile = T.alloc_shared((BM, N), "float16")
                T.annotate_safe_value({tile: 0})


def mismatched_copy_program(M, N, src_cols, dst_cols, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=128):
            T.copy(A[:, :src_cols], B[:, :dst_cols])  # the mismatched copy

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_copy_of_a_smaller_src_region_writes_only_that_region(arch):
    """Upstream's rule: a copy walks src's region when src is at least as on-chip as dst; a src that fits inside
    dst (an explicitly smaller region) copies whole and leaves the rest of dst as it was (a one-time warning)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = tilelang.compile(mismatched_copy_program(64, 8, 2, 3), target=f"musa -arch={arch}")
    assert arch != "mp_31" or any("leaves the rest of the dst region" in str(w.message) for w in caught)
    a = rand((64, 8), torch.float16)
    b = torch.full((64, 8), -7.0, dtype=torch.float16)
    kernel(a, b)
    expected = torch.full((64, 8), -7.0, dtype=torch.float16)
    expected[:, :2] = a[:, :2]
    torch.testing.assert_close(b, expected)


def _global_to_shared_mismatch(rows):
    @T.prim_func
    def main(A: T.Tensor((64, 32), "float32"), B: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((32, 32), "float32")
            T.copy(A[0:rows, :], S)  # the mismatched copy
            T.copy(S, B)

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("build, message", [
    (lambda: mismatched_copy_program(64, 8, 5, 3), r"A \(64, 5\) and B \(64, 3\) differ in extent \(5 vs 3, src dim 1, "
     r"dst dim 1\): the copy walks the src region, so it would write outside the dst region"),
    (lambda: _global_to_shared_mismatch(16), r"A \(16, 32\) and S \(32, 32\) differ in extent \(16 vs 32, src dim 0, "
     r"dst dim 0\): the copy walks the shared.dyn dst region, so it would read outside the src region"),
    (lambda: _global_to_shared_mismatch(64), r"A \(64, 32\) and S \(32, 32\) differ .*: the copy walks the shared.dyn "
     r"dst region, so part of the src region would not be copied"),
], ids=["write_past_dst", "read_past_src", "src_left_out"])
def test_copy_of_differing_extents_is_an_error_at_its_line(arch, build, message):
    """Every other mismatch of constant extents would read or write outside a region, or leave part of src out
    (before: a warning and a copy of the smaller extent); it is rejected at the user's line, naming both regions."""
    with pytest.raises(tilelang.CompileError, match=message) as info:
        tilelang.compile(build(), target=f"musa -arch={arch}")
    assert "# the mismatched copy" in str(info.value)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_copy_pairs_non_unit_dimensions_across_unit_ones(arch):
    """What upstream accepts beside equal shapes: unit dimensions pair with nothing (a (1, 16, 32) slice of a 3-D
    tensor into a (16, 32) tile, that into a (1, 16, 32) fragment, and back into a (16, 1, 32) slice)."""
    Bt, M, N = 3, 32, 32

    @T.prim_func
    def main(A: T.Tensor((Bt, M, N), "float32"), B: T.Tensor((M, Bt, N), "float32")):
        with T.Kernel(Bt, M // 16, threads=128) as (b, by):
            tile = T.alloc_shared((16, N), "float32")
            frag = T.alloc_fragment((1, 16, N), "float32")
            T.copy(A[b, by * 16:(by + 1) * 16, :], tile)
            T.copy(tile, frag)
            T.copy(frag, B[by * 16:(by + 1) * 16, b, :])

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    a, b = rand((Bt, M, N), torch.float32, 41), poison((M, Bt, N), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.permute(1, 0, 2))
