"""T.reduce_* on fragments along each dim, with and without clear, on 32- and 128-lane warps, in the simulator
against torch; and a reduction feeding an elementwise T.Parallel (a softmax-like row normalisation)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

REF = {
    "sum": lambda x, d: x.sum(d), "max": lambda x, d: x.amax(d), "min": lambda x, d: x.amin(d),
    "abssum": lambda x, d: x.abs().sum(d), "absmax": lambda x, d: x.abs().amax(d),
}
COMBINE = {"sum": torch.add, "abssum": torch.add, "max": torch.maximum, "absmax": torch.maximum,
           "min": torch.minimum}


def reduce_program(kind, M, N, dim, clear, threads):
    out_len = M if dim == 1 else N

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), O: T.Tensor((out_len,), "float32")):
        with T.Kernel(1, threads=threads):
            F = T.alloc_fragment((M, N), "float32")
            R = T.alloc_fragment((out_len,), "float32")
            T.copy(A, F)
            T.copy(O, R)
            getattr(T, f"reduce_{kind}")(F, R, dim=dim, clear=clear)
            T.copy(R, O)

    return main


# every kind along both dims, and with and without clear, on both arches, and each arch along both dims with and
# without clear (every pair of the four choices, not every product of them: CI time)
KIND_DIM_CLEAR_ARCH = [("sum", 0, True, "mp_31"), ("sum", 1, False, "mp_22"), ("max", 1, True, "mp_22"),
                       ("max", 0, False, "mp_31"), ("min", 0, True, "mp_22"), ("min", 1, False, "mp_31"),
                       ("abssum", 1, True, "mp_31"), ("abssum", 0, False, "mp_22"), ("absmax", 0, True, "mp_31"),
                       ("absmax", 1, False, "mp_22")]


@pytest.mark.parametrize("kind,dim,clear,arch", KIND_DIM_CLEAR_ARCH)
def test_reduce_matches_torch(arch, kind, dim, clear):
    M, N = 32, 64
    kernel = tilelang.compile(reduce_program(kind, M, N, dim, clear, 128), target=f"musa -arch={arch}")
    assert "AllReduce<" in kernel.get_device_source()
    a = rand((M, N), torch.float32, 7)
    init = rand((M if dim == 1 else N,), torch.float32, 8)
    o = init.clone()
    kernel(a, o)
    expected = REF[kind](a, dim)
    if not clear:
        expected = COMBINE[kind](init, expected)
    torch.testing.assert_close(o, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("threads", [64, 256])
def test_reduce_across_many_threads_uses_shared_memory(threads):
    # 8 rows over 256 threads: each row spans 32 threads or more on mp_22's 128-lane warps
    kernel = tilelang.compile(reduce_program("sum", 8, 512, 1, True, threads), target="musa -arch=mp_22")
    a = rand((8, 512), torch.float32, 9)
    o = torch.full((8,), float("nan"))
    kernel(a, o)
    torch.testing.assert_close(o, a.sum(1), rtol=1e-4, atol=1e-3)


def test_row_normalisation_with_a_reduced_fragment():
    M, N = 64, 32

    @T.prim_func
    def normalize(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((M, N), "float32")
            m = T.alloc_fragment((M,), "float32")
            s = T.alloc_fragment((M,), "float32")
            T.copy(A, F)
            T.reduce_max(F, m, dim=1)
            for i, j in T.Parallel(M, N):
                F[i, j] = T.exp(F[i, j] - m[i])
            T.reduce_sum(F, s, dim=1)
            for i, j in T.Parallel(M, N):
                F[i, j] = F[i, j] / s[i]
            T.copy(F, B)

    kernel = tilelang.compile(normalize)
    a = rand((M, N), torch.float32, 10)
    b = torch.full((M, N), float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, torch.softmax(a, 1), rtol=1e-5, atol=1e-5)


def test_reduce_shape_error_names_the_expected_shape():
    with pytest.raises(tilelang.CompileError, match=r"must have the shape of F \(16, 8\) without dim 1: \(16,\)"):
        @T.prim_func
        def bad(A: T.Tensor((16, 8), "float32")):
            with T.Kernel(1, threads=32):
                F = T.alloc_fragment((16, 8), "float32")
                R = T.alloc_fragment((8,), "float32")
                T.reduce_sum(F, R, dim=1)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("dim,reverse", [(0, False), (1, False), (1, True), (0, True)])
def test_cumsum_of_a_shared_tile(arch, dim, reverse):
    H, W = 24, 40

    @T.prim_func
    def scan(A: T.Tensor((H, W), "float32"), B: T.Tensor((H, W), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((H, W), "float32")
            T.copy(A, S)
            T.cumsum(S, dim=dim, reverse=reverse)
            T.copy(S, B)

    kernel = tilelang.compile(scan, target=f"musa -arch={arch}")
    assert "tl::Scan2D<128" in kernel.get_device_source()
    a = torch.randint(-4, 5, (H, W)).float()
    b = torch.full((H, W), float("nan"))
    kernel(a, b)
    expected = a.flip(dim).cumsum(dim).flip(dim) if reverse else a.cumsum(dim)
    torch.testing.assert_close(b, expected)


def test_cumsum_1d_into_another_tile():
    @T.prim_func
    def scan(A: T.Tensor((1000,), "float32"), B: T.Tensor((1000,), "float32")):
        with T.Kernel(1, threads=256):
            S = T.alloc_shared((1000,), "float32")
            D = T.alloc_shared((1000,), "float32")
            T.copy(A, S)
            T.cumsum(S, D)
            T.copy(D, B)

    kernel = tilelang.compile(scan)
    a = torch.randint(-4, 5, (1000,)).float()
    b = torch.full((1000,), float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, a.cumsum(0))


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("rows,cols", [(4, 384), (8, 96), (2, 320)])
def test_rows_that_do_not_split_over_the_threads_are_kept_apart(arch, rows, cols):
    """A fragment reduced along its rows (and the fragments that share its layout through whole-tile loops) is
    placed row by row when the coalesced placement would let a row straddle thread groups; a loop that reads the
    per-row result runs row by row too, so nothing is exchanged through shared memory."""
    import warnings

    @T.prim_func
    def main(X: T.Tensor((rows, cols), "float32"), Y: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((rows, cols), "float32")
            sq = T.alloc_fragment((rows, cols), "float32")
            total = T.alloc_fragment((rows,), "float32")
            T.copy(X, x)
            for i, j in T.Parallel(rows, cols):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, total, dim=1)
            for i, j in T.Parallel(rows, cols):
                Y[i, j] = X[i, j] / total[i]

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no exchange warning
        kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    x, y = rand((rows, cols), torch.float32, 3), poison((rows, cols), torch.float32)
    kernel(x, y)
    torch.testing.assert_close(y, x / (x * x).sum(1, keepdim=True), rtol=1e-5, atol=1e-5)


def test_a_row_spread_over_a_non_power_of_two_of_threads_is_a_clear_error():
    """A user layout (T.annotate_layout) that spreads each row over 25 threads: the combine cannot run it. (Without
    the annotation the row of 100 gets a power-of-two group of threads: test_reduce_uneven_lines.py.)"""
    @T.prim_func
    def main(X: T.Tensor((4, 100), "float32"), S: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((4, 100), "float32")
            s = T.alloc_fragment((4,), "float32")
            T.annotate_layout({x: T.Fragment((4, 100), forward_thread_fn=lambda i, j: i * 25 + j // 4,
                                             forward_index_fn=lambda i, j: j % 4)})
            T.copy(X, x)
            T.reduce_sum(x, s, dim=1)
            T.copy(s, S)

    with pytest.raises(tilelang.CompileError, match=r"a row of `x` spans 25 threads 1 apart; the cross-thread combine"
                                                    r"'s logical_width \(the threads\) must be a positive power of two, got 25"):
        tilelang.compile(main, target="musa -arch=mp_31")


def test_a_row_of_100_on_128_threads_reduces():
    @T.prim_func
    def main(X: T.Tensor((4, 100), "float32"), S: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((4, 100), "float32")
            s = T.alloc_fragment((4,), "float32")
            T.copy(X, x)
            T.reduce_sum(x, s, dim=1)
            T.copy(s, S)

    kernel = tilelang.compile(main, target="musa -arch=mp_31")
    x, s = rand((4, 100), torch.float32, 2), poison((4,), torch.float32)
    kernel(x, s)
    torch.testing.assert_close(s, x.sum(1), rtol=1e-5, atol=1e-5)


def staged_program(kind, M, N, src_scope, dst_scope, clear, threads=128):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), O: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=threads):
            src = T.alloc_shared((M, N), "float32") if src_scope == "shared" else T.alloc_fragment((M, N), "float32")
            dst = T.alloc_shared((M,), "float32") if dst_scope == "shared" else T.alloc_fragment((M,), "float32")
            T.copy(A, src)
            T.copy(O, dst)
            getattr(T, f"reduce_{kind}")(src, dst, dim=1, clear=clear)
            T.copy(dst, O)

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize(("src_scope", "dst_scope", "kind", "clear"),
                         [("shared", "shared", "sum", False), ("shared", "fragment", "max", True),
                          ("fragment", "shared", "absmax", False)])
def test_reduce_stages_shared_operands_through_fragments(arch, src_scope, dst_scope, kind, clear):
    # Upstream reduces shared tiles too; src (and dst, read first when clear=False) are staged through fragments.
    M, N = 32, 64
    kernel = tilelang.compile(staged_program(kind, M, N, src_scope, dst_scope, clear),
                              target=f"musa -arch={arch}")
    assert f"AllReduce<{'tl::SumOp' if kind == 'sum' else 'tl::MaxOp'}," in kernel.get_kernel_source()
    a = rand((M, N), torch.float32, 21)
    init = rand((M,), torch.float32, 22)
    o = init.clone()
    kernel(a, o)
    expected = REF[kind](a, 1) if clear else COMBINE[kind](init, REF[kind](a, 1))
    torch.testing.assert_close(o, expected, rtol=1e-5, atol=1e-4)


NAN_KINDS = ["max", "min", "absmax"]


def nan_program():
    # each kind without and with nan_propagate: outputs O[2 * k] and O[2 * k + 1]
    @T.prim_func
    def main(A: T.Tensor((4, 64), "float16"), O: T.Tensor((6, 4), "float16")):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((4, 64), "float16")
            T.copy(A, F)
            for k, kind in enumerate(NAN_KINDS):
                for nan_propagate in (False, True):
                    R = T.alloc_fragment((4,), "float16")
                    getattr(T, f"reduce_{kind}")(F, R, dim=1, nan_propagate=nan_propagate)
                    T.copy(R, O[2 * k + nan_propagate, :])

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_nan_propagate_makes_a_nan_the_row_result(arch):
    kernel = tilelang.compile(nan_program(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl::MaxOpNan" in source and "tl::MinOpNan" in source and "tl::MaxOp," in source
    a = rand((4, 64), torch.float16, 23)
    a[1, 7] = float("nan")  # a NaN in row 1 only; rows 0, 2, 3 are numbers
    o = poison((6, 4), torch.float16)
    kernel(a, o)
    rest, row = [0, 2, 3], a[1].float()[~torch.isnan(a[1])]
    for k, kind in enumerate(NAN_KINDS):
        expected = REF[kind](a.float(), 1).half()
        for nan_propagate in (False, True):
            out = o[2 * k + nan_propagate]
            torch.testing.assert_close(out[rest], expected[rest])
            if nan_propagate:
                assert torch.isnan(out[1])
            else:  # the NaN is skipped: the extremum of the row's numbers
                torch.testing.assert_close(out[1].float(), REF[kind](row, 0))


def batched_program(M, N, batch, threads):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=threads):
            F = T.alloc_fragment((M, N), "float32")
            R = T.alloc_fragment((N,), "float32")
            T.copy(A, F)
            T.reduce_sum(F, R, dim=0, batch=batch)
            T.copy(R, O)

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_batched_reduce_combines_several_results_per_exchange(arch):
    # Column sums of 64 x 512 over 256 threads: each thread holds partials of many columns, and a column spans
    # 64 threads 4 apart, so the batch also shares the shared-memory round.
    kernel = tilelang.compile(batched_program(64, 512, 4, 256), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl::BatchAllReduce<tl::SumOp," in source and ", 4, " in source and ">::run_batch(" in source
    a = rand((64, 512), torch.float32, 24)
    o = poison((512,), torch.float32)
    kernel(a, o)
    torch.testing.assert_close(o, a.sum(0), rtol=1e-4, atol=1e-3)


def test_reduce_batch_errors():
    with pytest.raises(tilelang.CompileError, match="batch must be >= 1"):
        batched_program(64, 64, 0, 128)
    with pytest.raises(tilelang.CompileError, match="exceeds total output elements"):
        batched_program(64, 64, 128, 128)
    with pytest.raises(tilelang.CompileError, match="must evenly divide"):
        batched_program(64, 64, 3, 128)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_reduce_of_a_1d_fragment_into_one_element(arch):
    @T.prim_func
    def main(A: T.Tensor((256,), "float32"), O: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((256,), "float32")
            R = T.alloc_fragment((1,), "float32")
            T.copy(A, F)
            T.reduce_max(F, R, dim=0)
            T.copy(R, O)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    a, o = rand((256,), torch.float32, 25), poison((1,), torch.float32)
    kernel(a, o)
    torch.testing.assert_close(o, a.max().reshape(1))


def reduce_into_gemm_rows_program(M, N, K, W, clear):
    """R is read per row of the gemm accumulator (the loop `C += R`) and is the row sum of F, a fragment laid out
    on its own: the reduction leaves its results where the gemm's rows are not, and one side reaches the other
    through shared memory (the reduction places R, the loop reads it relaid out)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), X: T.Tensor((M, W), "float32"),
             Rin: T.Tensor((M,), "float32"), C: T.Tensor((M, N), "float32"), Rout: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            F = T.alloc_fragment((M, W), "float32")
            R = T.alloc_fragment((M,), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(acc)
            T.gemm(A_s, B_s, acc)
            T.copy(X, F)
            T.copy(Rin, R)
            T.reduce_sum(F, R, dim=1, clear=clear)
            for i, j in T.Parallel(M, N):
                acc[i, j] += R[i]
            T.copy(acc, C)
            T.copy(R, Rout)

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("clear", [True, False])
def test_reduce_into_a_fragment_laid_out_by_a_gemm_goes_through_shared_memory(arch, clear):
    M, N, K, W = 32, 32, 32, 64
    kernel = tilelang.compile(reduce_into_gemm_rows_program(M, N, K, W, clear), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "R_exchange" in source
    a, b = rand((M, K), torch.float16, 1), rand((K, N), torch.float16, 2)
    x, r_in = rand((M, W), torch.float32, 3), rand((M,), torch.float32, 4)
    c, r_out = poison((M, N), torch.float32), poison((M,), torch.float32)
    kernel(a, b, x, r_in, c, r_out)
    rows = x.sum(1) if clear else r_in + x.sum(1)
    torch.testing.assert_close(r_out, rows, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(c, a.float() @ b.float() + rows[:, None], rtol=1e-3, atol=1e-3)


def row_centering_program(N, D, rows_per_block, threads):
    """LayerNorm-backward's shape (upstream examples/norm/layernorm.py): a row's sum read as `s[0]` by every
    iteration of a loop that also accumulates into a fragment another loop (T.clear's) laid out first."""

    @T.prim_func
    def main(X: T.Tensor((N, D), "float32"), Y: T.Tensor((N, D), "float32"), G: T.Tensor((D,), "float32")):
        with T.Kernel(N // rows_per_block, threads=threads) as bx:
            x = T.alloc_fragment((1, D), "float32")
            s = T.alloc_fragment((1,), "float32")
            acc = T.alloc_fragment((D,), "float32")
            T.clear(acc)
            for k in T.serial(rows_per_block):
                row = bx * rows_per_block + k
                for i, j in T.Parallel(1, D):
                    x[i, j] = X[row, j]
                T.reduce_sum(x, s, dim=1)
                for i, j in T.Parallel(1, D):
                    Y[row, j] = x[i, j] - s[0] / D
                    acc[j] += x[i, j]
            for j in T.Parallel(D):
                T.atomic_add(G[j], acc[j])

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_a_reduced_value_read_by_every_iteration_is_held_by_every_thread(arch):
    N, D = 16, 256
    kernel = tilelang.compile(row_centering_program(N, D, 4, 128), target=f"musa -arch={arch}")
    assert "AllReduce<" in kernel.get_device_source()
    x = rand((N, D), torch.float32, 3)
    y, g = poison((N, D), torch.float32), torch.zeros(D)
    kernel(x, y, g)
    torch.testing.assert_close(y, x - x.mean(1, keepdim=True), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(g, x.sum(0), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("arch", ["mp_22", "mp_31"])
@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_reduce_of_a_local_buffer_into_a_var(arch, kind):
    """Upstream main's reduce_local_to_var: `dst = T.alloc_var(dtype)` takes the one result of a 1-D reduction."""
    @T.prim_func
    def main(A: T.Tensor((8,), "float16"), B: T.Tensor((1,), "float16")):
        with T.Kernel(1, threads=1):
            src = T.alloc_local((8,), "float16")
            dst = T.alloc_var("float16")
            for i in T.serial(8):
                src[i] = A[i]
            getattr(T, f"reduce_{kind}")(src, dst, dim=0)
            B[0] = dst

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "  dst = dst_frag[0];" in kernel.get_kernel_source()
    a, b = rand((8,), torch.float16, 5), poison((1,), torch.float16)
    kernel(a, b)
    ref = {"sum": a.float().sum(), "max": a.float().max(), "min": a.float().min()}[kind]
    torch.testing.assert_close(b[0].float(), ref, rtol=1e-2, atol=1e-2)
