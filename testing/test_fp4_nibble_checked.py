"""Checked mode (TILELANG_SIM_CHECK=1) sees the nibble stores of packed FP4 (`tl::fp4_e2m1_store`): the checked print
hands the byte's access the nibble it uses (tl_sim::CheckSharedNibble), a shared byte counts written once both its
nibbles are, a nibble store is no hand-out of its buffer, and a read that uses a nibble no thread wrote is the
uninitialised-read error naming the buffer, the byte and the nibble. Reading the written half of a half-written byte
is fine; reading the whole byte (a uint8 view, a TME store of it) is not."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import line_of, poison, rand
from test_dependence_depth import checked_source
from test_dtypes_storage import FP4_VALUES, fp4_encode_codes

ARCHS = ["mp_31", "mp_22"]
N = 128


@pytest.fixture
def checked(monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    monkeypatch.setenv("TILELANG_SIM_SEED", "3")


def even_elements(read_odd=0, through_view=False):
    """Thread i stores fp4 element 2i of a shared tile (the low nibble of byte i) and reads element 2i + read_odd
    back; `through_view`: the tile's bytes are copied out through a uint8 view first."""
    @T.prim_func
    def main(A: T.Tensor((2 * N,), T.float32), B: T.Tensor((N,), T.uint8), C: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=N):
            S = T.alloc_shared((2 * N,), T.float4_e2m1fn)
            S_u8 = T.view(S, (N,), dtype=T.uint8)
            for i in T.Parallel(N):
                S[2 * i] = T.cast(A[2 * i], T.float4_e2m1fn)
            if through_view:
                T.copy(S_u8, B)  # the view's line
            for i in T.Parallel(N):
                C[i] = T.cast(S[2 * i + read_odd], T.float32)  # the read's line

    return main


def both_halves():
    """Every fp4 element of the tile written (the even ones by one loop, the odd ones by another), then its bytes
    copied out through a uint8 view (a TME store on mp_31) and its elements decoded."""
    @T.prim_func
    def main(A: T.Tensor((2 * N,), T.float32), B: T.Tensor((N,), T.uint8), C: T.Tensor((2 * N,), T.float32)):
        with T.Kernel(1, threads=N):
            S = T.alloc_shared((2 * N,), T.float4_e2m1fn)
            S_u8 = T.view(S, (N,), dtype=T.uint8)
            for i in T.Parallel(N):
                S[2 * i] = T.cast(A[2 * i], T.float4_e2m1fn)
            for i in T.Parallel(N):
                S[2 * i + 1] = T.cast(A[2 * i + 1], T.float4_e2m1fn)
            T.copy(S_u8, B)
            for i in T.Parallel(2 * N):
                C[i] = T.cast(S[i], T.float32)

    return main


def run(func, arch, c_len):
    kernel = tilelang.compile(func, target=f"musa -arch={arch}")
    a = rand((2 * N,), torch.float32, 11) * 3
    b, c = torch.full((N,), 90, dtype=torch.uint8), poison((c_len,), torch.float32)
    kernel(a, b, c)
    return a, b, c


@pytest.mark.parametrize("arch", ARCHS)
def test_the_checked_print_tracks_the_nibble_of_fp4_stores_and_loads(arch):
    checked_text, plain = checked_source(even_elements(), arch)
    assert "tl::fp4_e2m1_store(&buf_dyn_shmem[" in plain and "tl_sim::CheckShared<tl_sim::kAddress>" not in checked_text
    store = re.search(r"tl::fp4_e2m1_store\(&buf_dyn_shmem\[tl_sim::CheckSharedNibble<tl_sim::kAddress>\("
                      r"buf_dyn_shmem, \(\(\(int\)threadIdx\.x\) \* 2\) >> 1, \(\(\(int\)threadIdx\.x\) \* 2\) & 1, ",
                      checked_text)
    load = re.search(r"tl::fp4_e2m1_to_float\(buf_dyn_shmem\[tl_sim::CheckSharedNibble<tl_sim::kLoad>\(", checked_text)
    assert store and load, checked_text


@pytest.mark.parametrize("arch", ARCHS)
def test_a_tile_written_a_nibble_at_a_time_is_clean_in_checked_mode(arch, checked):
    a, b, c = run(both_halves(), arch, 2 * N)
    codes = fp4_encode_codes(a)
    assert torch.equal(b, (codes[0::2] | (codes[1::2] << 4)).to(torch.uint8))
    torch.testing.assert_close(c, FP4_VALUES[codes.long()])


@pytest.mark.parametrize("arch", ARCHS)
def test_reading_the_written_nibble_of_a_half_written_byte_is_clean(arch, checked):
    a, _, c = run(even_elements(read_odd=0), arch, N)
    torch.testing.assert_close(c, FP4_VALUES[fp4_encode_codes(a[0::2]).long()])


@pytest.mark.parametrize("arch", ARCHS)
def test_reading_the_unwritten_nibble_is_an_error_naming_it(arch, checked):
    with pytest.raises(RuntimeError, match=r"uninitialised read: shared load of `S` at element (\d+), its high nibble "
                                           r"\(4-bit element \d+\), which no thread of this block has written") as info:
        run(even_elements(read_odd=1), arch, N)
    element = int(re.search(r"at element (\d+)", str(info.value)).group(1))
    assert f"(4-bit element {2 * element + 1})" in str(info.value)
    assert f":{line_of(even_elements, '# the read')} in the user's source" in str(info.value)


@pytest.mark.parametrize("arch", ARCHS)
def test_reading_a_half_written_byte_whole_is_an_error(arch, checked):
    """The uint8 view's bytes: a generated vector load on mp_22, a TME store on mp_31 (a device model's read)."""
    expected = (r"read by a TME store, which no thread of this block has written whole \(a nibble store wrote only "
                r"one half of a byte" if arch == "mp_31" else
                r"whose high nibble no thread of this block has written \(a nibble store wrote only its low one")
    with pytest.raises(RuntimeError, match=r"uninitialised read: shared load of `S_u8` at element \d+, " + expected) \
            as info:
        run(even_elements(through_view=True), arch, N)
    assert f":{line_of(even_elements, '# the view')} in the user's source" in str(info.value)


@pytest.mark.parametrize("arch", ARCHS)
def test_unchecked_the_half_written_tile_runs(arch):
    a, b, c = run(even_elements(through_view=True), arch, N)
    torch.testing.assert_close(c, FP4_VALUES[fp4_encode_codes(a[0::2]).long()])
    assert torch.equal(b & 0xF, fp4_encode_codes(a[0::2]))
