"""Checked mode across launches: an output one kernel left partly unwritten (the launcher's poison still in its
tail), read by a later kernel that takes it as an input, is the same uninitialised-read error as within a launch,
naming the tensor, the element, the reading kernel and line, and the kernel that allocated it. A tail the first
kernel writes, or the user fills from torch, is no error; nothing is kept outside checked mode or past the tensor's
life (tilelang_musa/launcher/carried_poison.py, src/tl_templates/sim/sim/poisoned_globals.h)."""

import gc
import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import line_of, rand
from tilelang_musa.launcher import KernelLaunchError, carried_poison

ARCHS = ["mp_22", "mp_31"]
N = 256
VALID = 200  # the first kernel writes D[:VALID] only (unless asked to write it all)


def write_head(dtype, whole=False):
    """D[i] = A[i] * 2 for i < VALID (every i when `whole`)."""
    limit = N if whole else VALID

    @T.prim_func
    def write_head(A: T.Tensor((N,), dtype), D: T.Tensor((N,), dtype)):
        with T.Kernel(2, threads=128) as bx:
            tx = T.get_thread_binding()
            if bx * 128 + tx < limit:
                D[bx * 128 + tx] = A[bx * 128 + tx] * 2

    return write_head


def read_all(dtype):
    """E[i] = D[i] + 1 over the whole of D."""

    @T.prim_func
    def read_all(D: T.Tensor((N,), dtype), E: T.Tensor((N,), dtype)):
        with T.Kernel(2, threads=128) as bx:
            tx = T.get_thread_binding()
            E[bx * 128 + tx] = D[bx * 128 + tx] + 1

    return read_all


def kernels(arch, dtype="float32", whole=False):
    target = f"musa -arch={arch}"
    return (tilelang.compile(write_head(dtype, whole), out_idx=[1], target=target),
            tilelang.compile(read_all(dtype), out_idx=[1], target=target))


@pytest.fixture(autouse=True)
def _fresh_records():
    carried_poison.forget_all()
    yield
    carried_poison.forget_all()


@pytest.mark.parametrize("arch", ARCHS)
def test_a_tail_the_first_kernel_left_unwritten_is_named_when_the_second_reads_it(arch, monkeypatch):
    first, second = kernels(arch)
    a = rand((N,), torch.float32)
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    d = first(a)
    torch.testing.assert_close(d[:VALID], a[:VALID] * 2)
    with pytest.raises(KernelLaunchError) as info:
        second(d)
    message = str(info.value)
    assert "kernel 'read_all_kernel'" in message, message
    # The first unwritten element a thread reads: threads run in a seeded order, so any of the tail.
    found = re.search(r"uninitialised read: global load of `D` at element (\d+), which kernel 'write_head_kernel' returned "
                      r"as its output `D` \(the launcher allocated it and filled it with poison\) and which no thread "
                      r"of that launch or a later one has written", message)
    assert found, message
    assert VALID <= int(found.group(1)) < N, message
    generated = next(n for n, text in enumerate(second.get_kernel_source().splitlines(), 1) if "+ 1" in text)
    assert f"(line {generated} of the kernel source" in message, message
    assert f"test_uninit_reads_across_launches.py:{line_of(read_all, 'tx] + 1')} in the user's source" in message
    # The same tensor read again is still reported; a view of it too (one storage).
    with pytest.raises(KernelLaunchError, match="which kernel 'write_head_kernel' returned"):
        second(d.view(N))


@pytest.mark.parametrize("arch", ARCHS)
def test_no_error_when_the_first_kernel_writes_the_tail(arch, monkeypatch):
    first, second = kernels(arch, whole=True)
    a = rand((N,), torch.float32)
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    d = first(a)
    assert not carried_poison.any_records()  # everything written: nothing kept
    torch.testing.assert_close(second(d), a * 2 + 1)


@pytest.mark.parametrize("arch, dtype, fill", [("mp_22", "float32", 0.0), ("mp_31", "float32", 1000.0),
                                               ("mp_31", "int32", -1)])
def test_no_error_when_torch_fills_the_tail(arch, dtype, fill, monkeypatch):
    # -1 on int32 writes exactly the poison's bytes: the tensor's version counter says torch wrote it.
    first, second = kernels(arch, dtype)
    a = rand((N,), torch.float32) if dtype == "float32" else torch.randint(-50, 50, (N,), dtype=torch.int32)
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    d = first(a)
    assert carried_poison.any_records()
    d[VALID:] = fill
    expected = torch.cat([a[:VALID] * 2, torch.full((N - VALID,), fill, dtype=a.dtype)]) + 1
    torch.testing.assert_close(second(d), expected)


@pytest.mark.parametrize("arch", ["mp_22"])
def test_a_tail_written_through_a_raw_view_is_seen_by_its_bytes(arch, monkeypatch):
    # `.data` does not share the version counter; the check at the read still sees bytes that are not the poison.
    first, second = kernels(arch)
    a = rand((N,), torch.float32)
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    d = first(a)
    d.data[VALID:] = 3.0
    expected = torch.cat([a[:VALID] * 2, torch.full((N - VALID,), 3.0)]) + 1
    torch.testing.assert_close(second(d), expected)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_later_kernel_that_writes_the_tail_clears_the_record(arch, monkeypatch):
    first, second = kernels(arch)
    target = f"musa -arch={arch}"

    @T.prim_func
    def fill_tail(D: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            if tx < N - VALID:
                D[VALID + tx] = 5.0

    filler = tilelang.compile(fill_tail, target=target)
    a = rand((N,), torch.float32)
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    d = first(a)
    filler(d)
    assert not carried_poison.any_records()
    expected = torch.cat([a[:VALID] * 2, torch.full((N - VALID,), 5.0)]) + 1
    torch.testing.assert_close(second(d), expected)


@pytest.mark.parametrize("arch", ["mp_31"])
def test_nothing_is_kept_outside_checked_mode_or_past_the_tensor(arch, monkeypatch):
    first, second = kernels(arch)
    a = rand((N,), torch.float32)
    monkeypatch.delenv("TILELANG_SIM_CHECK", raising=False)
    d = first(a)
    assert not carried_poison.any_records()
    assert torch.isnan(second(d)[VALID:]).all()  # default mode: the poison flows on, unreported
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    d = first(a)
    assert carried_poison.any_records()
    del d
    gc.collect()
    assert not carried_poison.any_records()  # the record does not keep the tensor, and goes with it
    d = first(a)
    monkeypatch.delenv("TILELANG_SIM_CHECK")
    second(d)  # an unchecked launch that takes it drops the record (its writes were not recorded)
    assert not carried_poison.any_records()
