"""Vectorized atomics: `T.atomic_add` over a T.Parallel region or a tile of float16 / bfloat16 elements adds
consecutive elements in pairs, `tl::AtomicAddx2(&dst[i], &value[j])`, one 32-bit atomic of the device library
(atomicAdd on half2 / __mt_bfloat162); float32 keeps one `tl::AtomicAdd` an element (MUSA has no float2 / float4
atomic that its vendor's vectorizer uses: docs/ATOMICS_ON_MUSA.md). The MUSA C on mp_22 and mp_31, sums against
torch with many blocks adding into the same elements, the fold before/after (FoldAtomicAddPairs)."""

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from conftest import rand, without_locations
from tilelang_musa.transform.fold_atomic_add_pairs import fold_atomic_add_pairs

ARCHS = ["mp_22", "mp_31"]


def tile_sum(K: int, M: int, N: int, block: int, dtype: str):
    """B += the K slices of A, each block adding its slice of a block x block tile through shared memory."""

    @T.prim_func
    def tiles(A: T.Tensor((K, M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block), T.ceildiv(N, block), K, threads=32) as (bx, by, bz):
            A_shared = T.alloc_shared((block, block), dtype)
            T.copy(A[bz, bx * block, by * block], A_shared)
            for i, j in T.Parallel(block, block):
                T.atomic_add(B[bx * block + i, by * block + j], A_shared[i, j])

    return tiles


def region_sum(N: int, dtype: str):
    @T.prim_func
    def region(X: T.Tensor((N,), dtype), Out: T.Tensor((N,), dtype)):
        with T.Kernel(4, threads=32):
            T.atomic_add(Out[0:N], X[0:N])

    return region


def _check_sum(out: torch.Tensor, expected: torch.Tensor, dtype: str) -> None:
    tol = 2e-2 if dtype == "bfloat16" else 1e-2  # each addition rounds to the 16-bit type, in some order
    torch.testing.assert_close(out.float(), expected.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_tile_of_16_bit_adds_is_one_pair_atomic_per_two_elements(arch, dtype):
    kernel = tilelang.compile(tile_sum(3, 64, 64, 32, dtype), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "tl::AtomicAddx2(&B[" in src and "tl::AtomicAdd(&B[" not in src
    torch_dtype = getattr(torch, dtype)
    a = (rand((3, 64, 64), torch.float32, 51) / 4).to(torch_dtype)
    b = (rand((64, 64), torch.float32, 52) / 4).to(torch_dtype)
    expected = b.float() + a.float().sum(0)
    kernel(a, b)
    _check_sum(b, expected, dtype)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_region_add_from_global_pairs_the_elements_of_each_thread(arch, dtype):
    kernel = tilelang.compile(region_sum(256, dtype), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "tl::AtomicAddx2(&Out[" in src and "(((int)threadIdx.x) * 2)" in src  # a thread's pair of elements
    torch_dtype = getattr(torch, dtype)
    x = (rand((256,), torch.float32, 53) / 4).to(torch_dtype)
    out = (rand((256,), torch.float32, 54) / 4).to(torch_dtype)
    expected = out.float() + 4 * x.float()  # the 4 blocks add X once each
    kernel(x, out)
    _check_sum(out, expected, dtype)


@pytest.mark.parametrize("arch", ARCHS)
def test_float32_adds_stay_one_atomic_an_element_on_consecutive_threads(arch):
    kernel = tilelang.compile(tile_sum(3, 64, 64, 32, "float32"), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "tl::AtomicAddx" not in src and "tl::AtomicAdd(&B[" in src
    a, b = rand((3, 64, 64), torch.float32, 55), rand((64, 64), torch.float32, 56)
    expected = b + a.sum(0)
    kernel(a, b)
    torch.testing.assert_close(b, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
def test_rows_past_the_tensor_are_skipped_pair_by_pair(arch):
    """M = 48 rows, 32-row blocks: the second block's last 16 rows lie outside B; a pair lies in one row."""
    kernel = tilelang.compile(tile_sum(2, 48, 64, 32, "float16"), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "tl::AtomicAddx2(&B[" in src
    a = (rand((2, 48, 64), torch.float32, 57) / 4).half()
    b = (rand((48, 64), torch.float32, 58) / 4).half()
    expected = b.float() + a.float().sum(0)
    kernel(a, b)
    _check_sum(b, expected, "float16")


def converted_fragment(N: int, threads: int, dtype: str):
    """Out (float16 / bfloat16) += a float32 fragment's elements, converted: upstream's mixed-dtype case."""

    @T.prim_func
    def mixed(Src: T.Tensor((N,), "float32"), Out: T.Tensor((N,), dtype)):
        with T.Kernel(2, threads=threads):
            frag = T.alloc_fragment((N,), "float32")
            for i in T.Parallel(N):
                frag[i] = Src[i] * 0.5
            for i in T.Parallel(N):
                T.atomic_add(Out[i], frag[i])

    return mixed


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype,spelling", [("float16", "half_t"), ("bfloat16", "bfloat16_t")])
@pytest.mark.parametrize("N,threads", [(8, 1), (256, 32)])
def test_converted_float_lanes_are_added_in_pairs_of_values(arch, dtype, spelling, N, threads):
    kernel = tilelang.compile(converted_fragment(N, threads, dtype), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert f"tl::AtomicAddx2(&Out[" in src and f", tl::cast<{spelling}>(frag[" in src
    assert "tl::AtomicAdd(&Out[" not in src
    torch_dtype = getattr(torch, dtype)
    x = rand((N,), torch.float32, 62)
    out = (rand((N,), torch.float32, 63) / 4).to(torch_dtype)
    expected = out.float() + 2 * (x * 0.5).to(torch_dtype).float()  # two blocks, each adds the converted value
    kernel(x, out)
    _check_sum(out, expected, dtype)


def test_an_odd_offset_destination_keeps_one_atomic_an_element():
    """Out[1 + i]: a pair would straddle two 32-bit words."""

    @T.prim_func
    def shifted(X: T.Tensor((64,), "float16"), Out: T.Tensor((65,), "float16")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(64):
                T.atomic_add(Out[1 + i], X[i])

    kernel = tilelang.compile(shifted, target="musa -arch=mp_31")
    assert "tl::AtomicAddx2" not in kernel.get_kernel_source()
    x = (rand((64,), torch.float32, 59) / 4).half()
    out = (rand((65,), torch.float32, 60) / 4).half()
    expected = out.float().clone()
    expected[1:] += x.float()
    kernel(x, out)
    _check_sum(out, expected, "float16")


def test_a_misaligned_destination_tensor_is_refused_at_launch():
    kernel = tilelang.compile(region_sum(256, "float16"), target="musa -arch=mp_31")
    x = rand((256,), torch.float16, 61)
    storage = torch.zeros(257, dtype=torch.float16)
    with pytest.raises(ValueError, match="Out is read or written 4 bytes at a time"):
        kernel(x, storage[1:])  # 2-byte aligned: the pair atomics need 4


@T.prim_func
def lanes_before(A: T.Tensor((64,), "float16"), B: T.Tensor((64,), "float16")):
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        for v in T.vectorized(4):
            if tx < 16:
                T.evaluate(T.call_extern("int32", "tl::AtomicAdd", T.address_of(B[tx * 4 + v]), A[tx * 4 + v]))


@T.prim_func
def lanes_expected(A: T.Tensor((64,), "float16"), B: T.Tensor((64,), "float16")):
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        if tx < 16:
            T.evaluate(T.call_extern("int32", "tl::AtomicAddx2", T.address_of(B[tx * 4]), T.address_of(A[tx * 4])))
            T.evaluate(T.call_extern("int32", "tl::AtomicAddx2", T.address_of(B[tx * 4 + 2]),
                                     T.address_of(A[tx * 4 + 2])))


def test_four_lanes_under_a_lane_independent_guard_fold_into_two_pair_adds():
    after = without_locations(fold_atomic_add_pairs(lanes_before))
    tvm.ir.assert_structural_equal(after, without_locations(lanes_expected).with_attr(
        "global_symbol", lanes_before.attrs["global_symbol"]))


@T.prim_func
def float_lanes(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        for v in T.vectorized(2):
            T.evaluate(T.call_extern("int32", "tl::AtomicAdd", T.address_of(B[tx * 2 + v]), A[tx * 2 + v]))


def test_float32_lanes_run_one_by_one():
    after = fold_atomic_add_pairs(float_lanes).script()
    assert "AtomicAddx2" not in after and "T.vectorized" not in after and "for v in range(2)" in after


@T.prim_func
def converted_lanes(F: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float16")):
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        for v in T.vectorized(2):
            T.evaluate(T.call_extern("int32", "tl::AtomicAdd", T.address_of(B[tx * 2 + v]),
                                     T.cast(F[tx * 2 + v], "float16")))


@T.prim_func
def converted_pair(F: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float16")):
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        T.evaluate(T.call_extern("int32", "tl::AtomicAddx2", T.address_of(B[tx * 2]), T.cast(F[tx * 2], "float16"),
                                 T.cast(F[tx * 2 + 1], "float16")))


def test_converted_lanes_fold_into_one_pair_add_of_two_values():
    after = without_locations(fold_atomic_add_pairs(converted_lanes))
    tvm.ir.assert_structural_equal(after, without_locations(converted_pair).with_attr(
        "global_symbol", converted_lanes.attrs["global_symbol"]))


def explicit_lanes_of_another_type(lanes: int, dtype: str):
    """T.atomic_addx2 / x4 of float32 lanes into float16 / bfloat16 (upstream's mixed-dtype addx2): each lane is
    converted, then the lanes added as one call."""

    @T.prim_func
    def explicit(A: T.Tensor((32, 64), "float32"), B: T.Tensor((32, 64), dtype)):
        with T.Kernel(2, threads=32) as bx:
            for i, j in T.Parallel(16, 64 // lanes):
                if lanes == 2:
                    T.atomic_addx2(B[bx * 16 + i, j * 2], A[bx * 16 + i, j * 2])
                else:
                    T.atomic_addx4(B[bx * 16 + i, j * 4], A[bx * 16 + i, j * 4])

    return explicit


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("lanes,dtype,spelling", [(2, "float16", "half_t"), (4, "bfloat16", "bfloat16_t")])
def test_explicit_lanes_of_float32_are_converted_into_the_destination_type(arch, lanes, dtype, spelling):
    kernel = tilelang.compile(explicit_lanes_of_another_type(lanes, dtype), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert f"tl::AtomicAddx{lanes}(&B[" in src and f"tl::cast<{spelling}>(A[" in src
    torch_dtype = getattr(torch, dtype)
    a = rand((32, 64), torch.float32, 64)
    b = (rand((32, 64), torch.float32, 65) / 4).to(torch_dtype)
    expected = b.float() + a.to(torch_dtype).float()
    kernel(a, b)
    _check_sum(b, expected, dtype)


@pytest.mark.parametrize("value_dtype,return_prev", [("int32", False), ("float32", True)])
def test_explicit_lanes_of_another_type_are_an_error_where_not_converted(value_dtype, return_prev):
    with pytest.raises(tilelang.CompileError, match=r"T.atomic_addx2: dst is float16 but value is") as info:
        @T.prim_func
        def bad(A: T.Tensor((64,), value_dtype), B: T.Tensor((64,), "float16"), P: T.Tensor((2,), "float16")):
            with T.Kernel(1, threads=32):
                if return_prev:
                    P[0:2] = T.atomic_addx2(B[0:2], A[0:2], return_prev=True)
                else:
                    T.atomic_addx2(B[0:2], A[0:2])
    assert "T.atomic_addx2(B[0:2], A[0:2]" in str(info.value)
