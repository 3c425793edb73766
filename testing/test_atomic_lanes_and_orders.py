"""Upstream main's atomics: T.atomic_addx2 / addx4 on slices (also bound to a name, or a Ramp index) with
return_prev, T.atomic_or, and the memory orders a load or a store takes."""

import pytest
import torch

import tilelang
import tilelang.language as T

from conftest import poison

ARCHES = ["mp_22", "mp_31"]
DTYPES = [("float32", torch.float32), ("float16", torch.float16), ("bfloat16", torch.bfloat16)]


def _lanes_return_prev(lanes: int, dtype: str, spelling: str):
    add = T.atomic_addx2 if lanes == 2 else T.atomic_addx4

    @T.prim_func
    def main(Dst: T.Tensor((lanes,), dtype), Val: T.Tensor((lanes,), dtype), Prev: T.Tensor((lanes,), dtype)):
        with T.Kernel(1, threads=1):
            if spelling == "slice":
                Prev[0:lanes] = add(Dst[0:lanes], Val[0:lanes], return_prev=True)
            elif spelling == "bound":
                d = Dst[0:lanes]
                v = Val[0:lanes]
                Prev[0:lanes] = add(d, v, return_prev=True)
            else:
                Prev[0:lanes] = add(Dst[T.Ramp(0, 1, lanes)], Val[T.Ramp(0, 1, lanes)], return_prev=True)

    return main


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("dtype, torch_dtype", DTYPES)
@pytest.mark.parametrize("lanes, spelling", [(2, "slice"), (2, "bound"), (2, "ramp"), (4, "slice")])
def test_lanes_return_prev_gives_the_old_lanes(arch, dtype, torch_dtype, lanes, spelling):
    kernel = tilelang.compile(_lanes_return_prev(lanes, dtype, spelling), target=f"musa -arch={arch}")
    assert f"tl::AtomicAddx{lanes}Ret(&Dst[0], &Val[0])" in kernel.get_kernel_source()
    base = torch.arange(1, lanes + 1, dtype=torch.float32)
    dst, val, prev = base.to(torch_dtype).clone(), (base * 10).to(torch_dtype), poison((lanes,), torch_dtype)
    kernel(dst, val, prev)
    assert prev.tolist() == base.to(torch_dtype).tolist()
    assert dst.tolist() == (base * 11).to(torch_dtype).tolist()


@pytest.mark.parametrize("arch", ARCHES)
def test_addx4_into_a_run_time_row_slice(arch):
    """`T.atomic_addx4(dst[idx[t], 0:4], val[t, 0:4])`: 64 threads add their rows into 8 rows, 8 threads a row."""
    N, M = 64, 8

    @T.prim_func
    def main(idx: T.Tensor((N,), "int32"), val: T.Tensor((N, 4), "float32"), dst: T.Tensor((M, 4), "float32")):
        with T.Kernel(1, threads=N):
            t = T.get_thread_binding()
            T.atomic_addx4(dst[idx[t], 0:4], val[t, 0:4])

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "tl::AtomicAddx4(&dst[idx[(int)threadIdx.x] * 4], &val[((int)threadIdx.x) * 4])" in kernel.get_kernel_source()
    gen = torch.Generator().manual_seed(5)
    idx = torch.randperm(N, generator=gen).to(torch.int32) % M
    val = torch.randint(-50, 50, (N, 4), generator=gen).float()
    dst = torch.randint(-50, 50, (M, 4), generator=gen).float()
    ref = dst.clone().index_add_(0, idx.long(), val)
    kernel(idx, val, dst)
    assert torch.equal(dst, ref)


def test_lanes_slice_of_another_length_is_an_error_at_its_line():
    with pytest.raises(tilelang.CompileError, match=r"test_atomic_lanes_and_orders.py:\d+(.*\n)*.*T.atomic_addx4: dst "
                                                    r"Dst \(2\) must be 4 consecutive elements"):
        tilelang.compile(_lanes_return_prev_mismatch(), target="musa -arch=mp_31")


def _lanes_return_prev_mismatch():
    @T.prim_func
    def main(Dst: T.Tensor((4,), "float32"), Val: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=1):
            T.atomic_addx4(Dst[0:2], Val[0:4])

    return main


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("dtype, torch_dtype", [("int32", torch.int32), ("int64", torch.int64),
                                                ("uint32", torch.uint32)])
def test_atomic_or_sets_every_threads_bit(arch, dtype, torch_dtype):
    """128 threads each OR one bit (thread t: bit t % 31) into one of 4 words, which start with other bits set."""

    @T.prim_func
    def main(A: T.Tensor((4,), dtype)):
        with T.Kernel(1, threads=128):
            t = T.get_thread_binding()
            T.atomic_or(A[t % 4], T.shift_left(T.cast(1, dtype), t % 31), memory_order="release")

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl::AtomicOr(&A[" in source and "tl::fence_before<3>()" in source
    start = [0x40000000, 0, 0x7, 0x100]
    a = torch.tensor(start, dtype=torch.int64).to(torch_dtype)
    kernel(a)
    ref = list(start)
    for t in range(128):
        ref[t % 4] |= 1 << (t % 31)
    assert [int(x) for x in a.tolist()] == ref


def test_atomic_or_of_a_float_is_an_error():
    with pytest.raises(tilelang.CompileError, match=r"T.atomic_or: dst `A` is float32; it must be a 32- or 64-bit "
                                                    r"integer"):
        @T.prim_func
        def main(A: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=1):
                T.atomic_or(A[0], 1)


@pytest.mark.parametrize("construct, order, ok", [
    ("load", "acquire", True), ("load", "consume", True), ("load", "release", False), ("load", "acq_rel", False),
    ("store", "release", True), ("store", "relaxed", True), ("store", "acquire", False), ("store", "consume", False),
    ("store", "acq_rel", False), ("load", "invalid", False),
])
def test_a_load_takes_no_release_and_a_store_no_acquire(construct, order, ok):
    def build():
        @T.prim_func
        def main(S: T.Tensor((1,), "int32"), D: T.Tensor((1,), "int32")):
            with T.Kernel(1, threads=1):
                if construct == "load":
                    D[0] = T.atomic_load(S[0], memory_order=order)
                else:
                    T.atomic_store(D[0], 1, memory_order=order)

        return main

    if ok:
        assert build() is not None
        return
    with pytest.raises(ValueError, match=rf"T.atomic_{construct} does not support memory_order='{order}'"):
        build()


@pytest.mark.parametrize("dtype", ["int16", "int8", "uint16", "bool"])
@pytest.mark.parametrize("form", ["tile", "element", "load"])
def test_an_atomic_of_a_narrow_integer_is_an_error_at_its_line(dtype, form):
    """atomic.h has no 8/16-bit integer atomics: this was a host/device compiler error (a static_assert)."""
    with pytest.raises(tilelang.CompileError, match=rf"test_atomic_lanes_and_orders.py:\d+(.*\n)*.*`B` is {dtype}; "
                                                    r"atomics take float32, float64, float16, bfloat16"):
        @T.prim_func
        def main(A: T.Tensor((16, 16), dtype), B: T.Tensor((16, 16), dtype)):
            with T.Kernel(1, threads=128):
                if form == "tile":
                    T.atomic_add(B, A)
                elif form == "element":
                    T.atomic_max(B[0, 0], A[0, 1])
                else:
                    A[0, 0] = T.atomic_load(B[0, 0])
