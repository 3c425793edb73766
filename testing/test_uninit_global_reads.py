"""Uninitialised global reads named in the simulator's checked mode (issue 41): a load of an element of an output
the launcher allocated and poisoned, before anything of the call wrote it, ends the launch naming the buffer, the
element, the line of the generated source and the thread. Only what the launcher poisoned is checked: inputs may
hold any bytes. Every write path counts: stores, atomics, TME stores, an earlier kernel of the same call.

The mechanism is src/tl_templates/sim/sim/poisoned_globals.h: the launcher registers the ranges it filled with
poison (tl_sim_register_poisoned), a shadow byte per byte records the call's writes."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand
from tilelang_musa.launcher import KernelLaunchError

ARCHS = ["mp_22", "mp_31"]
N = 256


def line_of(source: str, snippet: str) -> int:
    return next(number for number, text in enumerate(source.splitlines(), 1) if snippet in text)


def output_read_before_written():
    """B[i] accumulates into itself: the output is read before anything wrote it."""

    @T.prim_func
    def accumulate(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            tx = T.get_thread_binding()
            B[bx * 128 + tx] = B[bx * 128 + tx] + A[bx * 128 + tx]

    return accumulate


@pytest.mark.parametrize("arch", ARCHS)
def test_a_read_of_an_output_before_any_write_is_named_in_checked_mode(arch, monkeypatch):
    kernel = tilelang.compile(output_read_before_written(), out_idx=[1], target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    a = rand((N,), torch.float32)
    assert torch.isnan(kernel(a)).all()  # default mode: no check, the poison shows as NaN
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    with pytest.raises(KernelLaunchError) as info:
        kernel(a)
    message = str(info.value)
    assert re.search(r"block \(\d,0,0\), thread \(\d+,0,0\): uninitialised read: global load of `B` at element "
                     r"\d+, which the launcher poisoned \(an output or workspace allocated for this call\) and no "
                     r"thread has written yet", message), message
    assert f"(line {line_of(source, '+ A[')} of the kernel source" in message, message
    assert "test_uninit_global_reads.py:" in message, message  # and the user's line


def int_output_written_with_poison_bytes_then_read():
    """Each thread stores -1 (the poison's bytes) or its input to B, then reads B back into C."""

    @T.prim_func
    def roundtrip(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32"), C: T.Tensor((N,), "int32")):
        with T.Kernel(2, threads=128) as bx:
            tx = T.get_thread_binding()
            i = bx * 128 + tx
            if tx % 2 == 0:
                B[i] = -1
            else:
                B[i] = A[i]
            C[i] = B[i] * 3 + A[i]

    return roundtrip


@pytest.mark.parametrize("arch", ARCHS)
def test_outputs_written_with_the_poison_bytes_and_inputs_holding_them_are_not_reported(arch, monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    kernel = tilelang.compile(int_output_written_with_poison_bytes_then_read(), out_idx=[1, 2],
                              target=f"musa -arch={arch}")
    a = torch.randint(-5, 5, (N,), dtype=torch.int32)
    a[::3] = -1  # an input may hold the poison's bytes
    b, c = kernel(a)
    want_b = a.clone()
    want_b[0::2] = -1
    torch.testing.assert_close(b, want_b)
    torch.testing.assert_close(c, want_b * 3 + a)


def written_by_one_kernel_read_by_the_next():
    """Two kernels in one call: the first writes W by an atomic and an element store, the second reads it."""

    @T.prim_func
    def two_kernels(A: T.Tensor((N,), "float32"), W: T.Tensor((N,), "float32"), H: T.Tensor((4,), "int32"),
                    B: T.Tensor((N,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            tx = T.get_thread_binding()
            W[bx * 128 + tx] = A[bx * 128 + tx] * 2
            if bx == 0 and tx < 4:
                H[tx] = 0
        with T.Kernel(2, threads=128) as bx:
            tx = T.get_thread_binding()
            B[bx * 128 + tx] = W[bx * 128 + tx] + W[(bx * 128 + tx + 1) % N]
            T.atomic_add(H[tx % 4], 1)

    return two_kernels


@pytest.mark.parametrize("arch", ARCHS)
def test_writes_of_an_earlier_kernel_of_the_call_count(arch, monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    kernel = tilelang.compile(written_by_one_kernel_read_by_the_next(), out_idx=[1, 2, 3],
                              target=f"musa -arch={arch}")
    a = rand((N,), torch.float32)
    w, h, b = kernel(a)
    torch.testing.assert_close(w, a * 2)
    torch.testing.assert_close(b, a * 2 + torch.roll(a, -1) * 2)
    torch.testing.assert_close(h, torch.full((4,), N // 4, dtype=torch.int32))


def atomic_into_an_output_then_read():
    """An atomic's address handed to the template counts as a write: the threads' maxima land in M, then read."""

    @T.prim_func
    def atomic_then_read(A: T.Tensor((128,), "int32"), M: T.Tensor((1,), "int32"), B: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            T.atomic_max(M[0], A[tx])
            T.sync_threads()
            B[tx] = M[0] - A[tx]

    return atomic_then_read


@pytest.mark.parametrize("arch", ARCHS)
def test_an_atomic_counts_as_a_write(arch, monkeypatch):
    """M starts as -1 (poison), so the maximum of non-negative inputs is right; reading it back is no report."""
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    kernel = tilelang.compile(atomic_into_an_output_then_read(), out_idx=[1, 2], target=f"musa -arch={arch}")
    a = torch.randint(0, 1000, (128,), dtype=torch.int32)
    m, b = kernel(a)
    assert int(m[0]) == int(a.max())
    torch.testing.assert_close(b, a.max() - a)


def tme_store_then_read(tme: bool):
    """The first kernel stores a shared tile to O (by the TME on mp_31), the second reads O."""

    @T.prim_func
    def tme_then_read(A: T.Tensor((64, 64), "float32"), O: T.Tensor((64, 64), "float32"),
                      B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((64, 64), "float32")
            T.copy(A, S)
            if tme:
                T.tma_copy(S, O)
                T.tma_store_wait()
            else:
                T.copy(S, O)
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(64, 64):
                B[i, j] = O[j, i] + 1

    return tme_then_read


@pytest.mark.parametrize("arch", ARCHS)
def test_a_tme_store_counts_as_a_write(arch, monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    kernel = tilelang.compile(tme_store_then_read(arch == "mp_31"), out_idx=[1, 2], target=f"musa -arch={arch}")
    assert ("tl::tma_store<" in kernel.get_kernel_source()) == (arch == "mp_31")
    a = rand((64, 64), torch.float32)
    o, b = kernel(a)
    torch.testing.assert_close(o, a)
    torch.testing.assert_close(b, a.T + 1)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_tme_load_of_an_unwritten_output_is_named(arch, monkeypatch):
    """The first kernel reads O (never written) into shared memory (a TME load on mp_31) and copies it out."""

    @T.prim_func
    def tme_load_unwritten(A: T.Tensor((64, 64), "float32"), O: T.Tensor((64, 64), "float32"),
                           B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((64, 64), "float32")
            T.copy(O, S)
            for i, j in T.Parallel(64, 64):
                B[i, j] = S[i, j] + A[i, j]

    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    kernel = tilelang.compile(tme_load_unwritten, out_idx=[1, 2], target=f"musa -arch={arch}")
    with pytest.raises(KernelLaunchError) as info:
        kernel(rand((64, 64), torch.float32))
    message = str(info.value)
    if "tl::tma_load" in kernel.get_kernel_source():
        assert "uninitialised read: global load of `(the TME load's tile)`" in message, message
        assert "which the launcher poisoned (an output or workspace allocated for this call)" in message, message
    else:
        assert "uninitialised read: global load of `O` at element" in message, message
