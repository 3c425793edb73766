"""LegalizeVectorizedLoops: an explicit `T.vectorized(N)` wider than 128 bits runs as 128-bit pieces where the piece
has a MUSA built-in vector type (`float4`, `int4`, `longlong2`, `double2`), each piece as wide as the accesses'
alignment allows (`float2` where rows are 8-byte aligned); 8- and 16-bit elements keep one `tl::vec` access, and
`T.vectorized(1)` and a loop whose lanes share a private element are serial loops. Moore Threads' test_tilelang_language_vectorize.py expects the same."""

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from conftest import rand, without_locations
from tilelang_musa.transform.legalize_vectorized_loops import legalize_vectorized_loops

ARCHS = ["mp_22", "mp_31"]


def _assert_splits_to(before, expected):
    after = without_locations(legalize_vectorized_loops(before))
    tvm.ir.assert_structural_equal(after, without_locations(expected).with_attr("global_symbol",
                                                                                 before.attrs["global_symbol"]))


@T.prim_func
def wide_before(A: T.Tensor((128, 32), "float32"), B: T.Tensor((128, 32), "float32")):
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        for i in T.vectorized(32):
            B[tx, i] = A[tx, i] * 2.0


@T.prim_func
def wide_expected(A: T.Tensor((128, 32), "float32"), B: T.Tensor((128, 32), "float32")):
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        for i_o in T.serial(8):
            for i in T.vectorized(4):
                B[tx, i_o * 4 + i] = A[tx, i_o * 4 + i] * 2.0


def test_a_float_loop_of_1024_bits_becomes_float4_pieces():
    _assert_splits_to(wide_before, wide_expected)


@T.prim_func
def odd_rows_before(A: T.Tensor((128, 34), "float32"), B: T.Tensor((128, 34), "float32")):
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        for i in T.vectorized(32):
            B[tx, i] = A[tx, i]


@T.prim_func
def odd_rows_expected(A: T.Tensor((128, 34), "float32"), B: T.Tensor((128, 34), "float32")):
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        for i_o in T.serial(16):
            for i in T.vectorized(2):
                B[tx, i_o * 2 + i] = A[tx, i_o * 2 + i]


def test_rows_aligned_to_8_bytes_give_float2_pieces():
    _assert_splits_to(odd_rows_before, odd_rows_expected)


@T.prim_func
def grouped_before(A: T.Tensor((128, 32), "float32"), C: T.Tensor((128, 8), "float32"),
                   B: T.Tensor((128, 32), "float32")):
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        for i in T.vectorized(32):
            B[tx, i] = A[tx, i] * C[tx, i // 4]


@T.prim_func
def grouped_expected(A: T.Tensor((128, 32), "float32"), C: T.Tensor((128, 8), "float32"),
                     B: T.Tensor((128, 32), "float32")):
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        for i_o in T.serial(8):
            for i in T.vectorized(4):
                B[tx, i_o * 4 + i] = A[tx, i_o * 4 + i] * C[tx, (i_o * 4 + i) // 4]


def test_a_load_shared_by_the_lanes_of_a_piece_is_admitted():
    _assert_splits_to(grouped_before, grouped_expected)


@T.prim_func
def narrow_and_bytes(A: T.Tensor((128, 64), "int8"), B: T.Tensor((128, 64), "int8"),
                     F: T.Tensor((128, 4), "float32"), G: T.Tensor((128, 4), "float32")):
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        for i in T.vectorized(64):  # 512 bits of int8: no built-in type of 16 chars
            B[tx, i] = A[tx, i]
        for j in T.vectorized(4):  # 128 bits: as it was
            G[tx, j] = F[tx, j]


def test_bytes_and_loops_of_at_most_128_bits_stay_as_they_are():
    _assert_splits_to(narrow_and_bytes, narrow_and_bytes)


@T.prim_func
def one_lane_before(A: T.Tensor((4,), "float32")):
    with T.Kernel(1, threads=1):
        for i in T.vectorized(1):
            A[i] = 1.0


@T.prim_func
def one_lane_expected(A: T.Tensor((4,), "float32")):
    with T.Kernel(1, threads=1):
        for i in T.serial(1):
            A[i] = 1.0


def test_one_lane_is_a_serial_loop():
    _assert_splits_to(one_lane_before, one_lane_expected)


def strided_copy(n, stride_a, stride_b, dtype):
    @T.prim_func
    def copy(A: T.StridedTensor[(n, 128), (1, stride_a), dtype], B: T.StridedTensor[(n, 128), (1, stride_b), dtype]):
        with T.Kernel(1, threads=128):
            col = T.get_thread_binding()
            for row in T.vectorized(n):
                B[row, col] = A[row, col] + A[row, col]

    return copy


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype,stride_a,stride_b,vector", [
    ("float32", 64, 64, "float4"), ("float32", 66, 68, "float2"), ("int32", 68, 72, "int4"),
    ("int64", 64, 64, "longlong2"), ("float64", 64, 66, "double2"), ("float16", 64, 64, "tl::vec<half_t, 64>"),
])
def test_the_printed_accesses_and_the_numbers(arch, dtype, stride_a, stride_b, vector):
    kernel = tilelang.compile(strided_copy(64, stride_a, stride_b, dtype), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert f"reinterpret_cast<{vector}*>(A + " in source
    if not vector.startswith("tl::vec"):
        assert ", 64>" not in source  # no access of 64 lanes left
    torch_dtype = getattr(torch, dtype)
    base_a = rand((128, stride_a), torch_dtype) if torch_dtype.is_floating_point else \
        torch.randint(-1000, 1000, (128, stride_a), dtype=torch_dtype)
    base_b = torch.full((128, stride_b), 7, dtype=torch_dtype)
    a = torch.as_strided(base_a, (64, 128), (1, stride_a))
    b = torch.as_strided(base_b, (64, 128), (1, stride_b))
    kernel(a, b)
    torch.testing.assert_close(b, a + a)


@T.prim_func
def shared_private_before(A: T.Tensor((128, 4), "float32"), B: T.Tensor((128, 4), "float32")):
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        for v in T.vectorized(4):
            t = T.alloc_local((1,), "float32")
            t[0] = A[tx, v]
            B[tx, v] = t[0] * 3.0


@T.prim_func
def shared_private_expected(A: T.Tensor((128, 4), "float32"), B: T.Tensor((128, 4), "float32")):
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        for v in T.serial(4):
            t = T.alloc_local((1,), "float32")
            t[0] = A[tx, v]
            B[tx, v] = t[0] * 3.0


def test_lanes_sharing_a_private_element_run_serially():
    _assert_splits_to(shared_private_before, shared_private_expected)


@pytest.mark.parametrize("arch", ARCHS)
def test_lanes_sharing_a_private_element_compute_each_lanes_value(arch):
    # VectorizeLoop alone stored the four lanes into t[0] and gave every lane the last one.
    kernel = tilelang.compile(shared_private_before, target=f"musa -arch={arch}")
    a = rand((128, 4), torch.float32)
    b = torch.full((128, 4), float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, a * 3.0)


@T.prim_func
def shared_global_before(A: T.Tensor((128, 4), "float32"), B: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        B[tx] = 0.0
        for k in T.vectorized(4):
            B[tx] = B[tx] + A[tx, k]


@T.prim_func
def shared_global_expected(A: T.Tensor((128, 4), "float32"), B: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        B[tx] = 0.0
        for k in T.serial(4):
            B[tx] = B[tx] + A[tx, k]


def test_lanes_sharing_a_global_element_run_serially():
    """Upstream main's vectorize_global_invariant_store_accumulate."""
    _assert_splits_to(shared_global_before, shared_global_expected)


@pytest.mark.parametrize("arch", ARCHS)
def test_lanes_sharing_a_global_element_accumulate_every_lane(arch):
    # VectorizeLoop alone gave every lane B[tx] as it was before the loop: B[tx] = A[tx, 3], not the row's sum.
    kernel = tilelang.compile(shared_global_before, target=f"musa -arch={arch}")
    a = rand((128, 4), torch.float32)
    b = torch.full((128,), float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, a.sum(1))


def bound_select():
    @T.prim_func
    def select(A: T.Tensor((128, 8), "float32"), B: T.Tensor((128, 8), "float16")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            for v in T.vectorized(8):
                x = A[tx, v]
                B[tx, v] = T.cast(T.if_then_else(x > 0, x, x * 0.5), "float16")

    return select


@pytest.mark.parametrize("arch", ARCHS)
def test_a_bound_lane_value_chosen_by_a_lane_condition_runs_serially(arch):
    # VectorizeLoop alone scalarized it around a never-bound copy of `x`: the printer rejected the kernel.
    kernel = tilelang.compile(bound_select(), target=f"musa -arch={arch}")
    assert "for (int v = 0; v < 8; ++v)" in kernel.get_kernel_source()
    a = rand((128, 8), torch.float32)
    b = torch.full((128, 8), float("nan"), dtype=torch.float16)
    kernel(a, b)
    torch.testing.assert_close(b, torch.where(a > 0, a, a * 0.5).half())
