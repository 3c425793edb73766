"""LegalizeNegativeIndex: an index negative for every value it takes counts from the end of its dimension (upstream's
`A[-1]`, `A[-i - 1]`); an index of unknown sign is left alone. Before/expected IR, and a kernel in the simulator."""

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang.errors import CompileError
from tilelang.transform import LegalizeNegativeIndex


@T.prim_func
def constant_before(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    B[0] = A[T.int32(-1)]


@T.prim_func
def constant_expected(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    B[0] = A[T.int32(15)]


@T.prim_func
def affine_before(A: T.Buffer((16,), "float32"), B: T.Buffer((4,), "float32")):
    for i in T.serial(4):
        B[i] = A[-i - 1]


@T.prim_func
def affine_expected(A: T.Buffer((16,), "float32"), B: T.Buffer((4,), "float32")):
    for i in T.serial(4):
        B[i] = A[15 - i]


@T.prim_func
def unknown_sign(shift: T.int32, A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in T.serial(16):
        B[i] = A[shift + i]


@pytest.mark.parametrize("before,expected", [(constant_before, constant_expected), (affine_before, affine_expected),
                                             (unknown_sign, unknown_sign)])
def test_negative_indices_count_from_the_end(before, expected):
    after = LegalizeNegativeIndex()(tvm.IRModule({"main": before}))["main"]
    tvm.ir.assert_structural_equal(after.body, expected.body, map_free_vars=True)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_a_kernel_reading_from_the_end(arch):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((65,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            B[tx] = A[-tx - 1]
            if tx == 0:
                B[-1] = A[-1] * 2.0

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "A[63 - ((int)threadIdx.x)]" in source and "B[64] = A[63]" in source
    a, b = rand((64,), torch.float32, 91), poison((65,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b[:64], a.flip(0))
    torch.testing.assert_close(b[64], a[63] * 2.0)


# Vector indices (upstream issue 2554): each lane of a ramp that may be negative counts from the end on its own.
@T.prim_func
def ramp_negative_before(A: T.Buffer((16,), "float32"), B: T.Buffer((4,), "float32")):
    B[T.Ramp(0, 1, 4)] = A[T.Ramp(-4, 1, 4)]


@T.prim_func
def ramp_negative_expected(A: T.Buffer((16,), "float32"), B: T.Buffer((4,), "float32")):
    B[T.Ramp(0, 1, 4)] = A[T.Ramp(12, 1, 4)]


@T.prim_func
def ramp_straddling(A: T.Buffer((16,), "float32"), B: T.Buffer((4, 4), "float32")):
    for t in T.serial(4):
        B[t, T.Ramp(0, 1, 4)] = A[T.Ramp(t - 2, 1, 4)]


def test_negative_ramp_shifts_whole():
    after = LegalizeNegativeIndex()(tvm.IRModule({"main": ramp_negative_before}))["main"]
    tvm.ir.assert_structural_equal(after.body, ramp_negative_expected.body, map_free_vars=True)


def test_straddling_ramp_wraps_lane_by_lane():
    after = LegalizeNegativeIndex()(tvm.IRModule({"main": ramp_straddling}))["main"]
    loop = after.body
    t = loop.loop_var
    index = loop.body.value.indices[0]
    i32 = lambda k: tvm.tirx.const(k, "int32")  # noqa: E731
    # lanes t-2 and t-1 may be negative (t < 4): picked at run time; lanes t and t+1 are never negative
    expected = tvm.tirx.Shuffle(
        [tvm.tirx.Select(t - 2 < 0, t + 14, t - 2), tvm.tirx.Select(t - 1 < 0, t + 15, t - 1), t, t + 1],
        [i32(k) for k in range(4)])
    analyzer = tvm.sym.Analyzer()
    assert isinstance(index, tvm.tirx.Shuffle) and len(index.vectors) == 4
    for got, want in zip(index.vectors, expected.vectors):
        assert analyzer.can_prove_equal(got, want) or tvm.ir.structural_equal(got, want), (got, want)


@T.prim_func
def broadcast_negative_before(A: T.Buffer((1024,), "float32"), B: T.Buffer((4,), "float32")):
    B[T.Ramp(0, 1, 4)] = A[T.Broadcast(-1, 4)]


@T.prim_func
def broadcast_negative_expected(A: T.Buffer((1024,), "float32"), B: T.Buffer((4,), "float32")):
    B[T.Ramp(0, 1, 4)] = A[T.Broadcast(1023, 4)]


def test_negative_broadcast_counts_from_the_end():
    """Every lane of a broadcast reads one index: a negative one is the broadcast of `n + index` (upstream's
    test_buffer_load_vector_index_negative_broadcast)."""
    after = LegalizeNegativeIndex()(tvm.IRModule({"main": broadcast_negative_before}))["main"]
    tvm.ir.assert_structural_equal(after.body, broadcast_negative_expected.body, map_free_vars=True)


@T.prim_func
def ramp_straddling_int64_before(A: T.Buffer((T.int64(3000000000),), "float32"), B: T.Buffer((4,), "float32")):
    B[T.Ramp(0, 1, 4)] = A[T.Ramp(T.int32(-2), T.int32(1), 4)]


@T.prim_func
def ramp_straddling_int64_expected(A: T.Buffer((T.int64(3000000000),), "float32"), B: T.Buffer((4,), "float32")):
    B[T.Ramp(0, 1, 4)] = A[T.Shuffle([T.int64(2999999998), T.int64(2999999999), T.int64(0), T.int64(1)],
                                     [0, 1, 2, 3])]


def test_straddling_ramp_over_an_int64_dimension_wraps_in_int64():
    """The wrapped lanes of an int32 ramp over a dimension of int64 extent are all int64 (one lane dtype; was a
    TVM InternalError building a Shuffle of int32 and int64 lanes)."""
    after = LegalizeNegativeIndex()(tvm.IRModule({"main": ramp_straddling_int64_before}))["main"]
    tvm.ir.assert_structural_equal(after.body, ramp_straddling_int64_expected.body, map_free_vars=True)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_shuffle_index_gathers_and_scatters(arch):
    """T.Shuffle (TVMScript's lane shuffle) as an index: lane k is lane indices[k] of the listed scalars."""

    @T.prim_func
    def main(A: T.Tensor((16,), T.float32), B: T.Tensor((4, 16), T.float32), C: T.Tensor((4, 4), T.float32)):
        with T.Kernel(1, threads=4):
            t = T.get_thread_binding()
            B[t, T.Shuffle([5, t, 15 - t, 8], [1, 2, 0, 3])] = A[T.Ramp(t * 4, 1, 4)]  # columns t, 15-t, 5, 8
            C[t, T.Ramp(0, 1, 4)] = A[T.Shuffle([15 - t, t, 3, 9], [2, 0, 1, 3])]

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    a, b, c = rand((16,), torch.float32, 23), poison((4, 16), torch.float32), poison((4, 4), torch.float32)
    kernel(a, b, c)
    for t in range(4):
        cols = [t, 15 - t, 5, 8]
        torch.testing.assert_close(b[t, cols], a[t * 4:t * 4 + 4])
        assert torch.isnan(b[t, [k for k in range(16) if k not in cols]]).all()
        torch.testing.assert_close(c[t], a[[3, 15 - t, t, 9]])


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_kernel_broadcasting_an_element_counted_from_the_end(arch):
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32), B: T.Tensor((4, 4), T.float32)):
        with T.Kernel(1, threads=4):
            t = T.get_thread_binding()
            B[t, T.Ramp(0, 1, 4)] = A[T.Broadcast(-1 - t, 4)]

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "tl::gather(A, tl::broadcast<int, 4>(63 - ((int)threadIdx.x)))" in kernel.get_kernel_source()
    a, b = rand((64,), torch.float32, 17), poison((4, 4), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a[60:].flip(0)[:, None].expand(4, 4))


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_vector_load_and_store_across_zero(arch):
    @T.prim_func
    def load(A: T.Tensor((1024,), T.float32), B: T.Tensor((4, 4), T.float32)):
        with T.Kernel(1, threads=1):
            for t in T.serial(4):
                B[t, T.Ramp(0, 1, 4)] = A[T.Ramp(t - 2, 1, 4)]

    kernel = tilelang.compile(load, target=f"musa -arch={arch}")
    assert "tl::gather(A" in kernel.get_kernel_source()
    a, b = rand((1024,), torch.float32, 5), poison((4, 4), torch.float32)
    kernel(a, b)
    rows = torch.arange(4).unsqueeze(1) + torch.arange(4) - 2
    torch.testing.assert_close(b, a[rows % 1024])

    @T.prim_func
    def store(B: T.Tensor((4, 4), T.float32), A: T.Tensor((1024,), T.float32)):
        with T.Kernel(1, threads=1):
            for t in T.serial(4):
                A[T.Ramp(t - 2, 1, 4)] = B[t, T.Ramp(0, 1, 4)]

    kernel = tilelang.compile(store, target=f"musa -arch={arch}")
    assert "tl::scatter(A" in kernel.get_kernel_source()
    b, a = rand((4, 4), torch.float32, 6), rand((1024,), torch.float32, 7)
    expected = a.clone()
    for t in range(4):
        expected[(torch.arange(4) + t - 2) % 1024] = b[t]
    kernel(b, a)
    torch.testing.assert_close(a, expected)


@T.prim_func
def ramp_data_dependent(idx: T.Buffer((4,), "int32"), A: T.Buffer((64,), "float32"), B: T.Buffer((16,), "float32")):
    for t in T.serial(4):
        B[T.Ramp(t * 4, 1, 4)] = A[T.Ramp(idx[t] * 4, 1, 4)]


def test_data_dependent_ramp_stays_a_vector_access():
    """A vector index whose sign only the data decides stays as written (a contiguous vector load), unlike
    upstream, which wraps every lane at run time."""
    after = LegalizeNegativeIndex()(tvm.IRModule({"main": ramp_data_dependent}))["main"]
    tvm.ir.assert_structural_equal(after.body, ramp_data_dependent.body, map_free_vars=True)


@T.prim_func
def ramp_guarded(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i in T.serial(16):
        if i >= 1:
            B[T.Ramp(i * 4, 1, 4)] = A[T.Ramp(i * 4 - 4, 1, 4)]


def test_ramp_non_negative_under_its_condition_is_unchanged():
    after = LegalizeNegativeIndex()(tvm.IRModule({"main": ramp_guarded}))["main"]
    tvm.ir.assert_structural_equal(after.body, ramp_guarded.body, map_free_vars=True)


def test_shuffle_lane_index_out_of_range_is_an_error():
    with pytest.raises(CompileError, match=r"T.Shuffle: lane index 5 must be a compile-time int in \[0, 2\)"):
        @T.prim_func
        def main(A: T.Tensor((16,), T.float32), B: T.Tensor((2,), T.float32)):
            with T.Kernel(1, threads=1):
                B[T.Ramp(0, 1, 2)] = A[T.Shuffle([1, 2], [0, 5])]
