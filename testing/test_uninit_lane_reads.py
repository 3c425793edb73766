"""Uninitialised reads of integer fragments and locals through vector forms, in the simulator's checked mode (issue 41).

A gathered load (`tl::gather(L, index)`) reads element index[l] in lane l; a lane-wise select (`tl::select`)
evaluates both branches in every lane and keeps one per lane; `T.if_then_else` evaluates only the chosen branch.
So (uninit_reads.h): a gathered load is checked per lane where its value is used, and where it is carried into a
store each lane carries its own element; a lane-wise select's branch is checked in the lanes that take it, and a
store of one carries, per lane, the chosen branch's lane; a store of `T.if_then_else` carries its chosen branch."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_musa.launcher import KernelLaunchError

ARCHS = ["mp_22", "mp_31"]


def line_of(source: str, snippet: str) -> int:
    return next(number for number, text in enumerate(source.splitlines(), 1) if snippet in text)


def ints(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-50, 50, (n,), generator=g, dtype=torch.int32)


def gathered_unwritten():
    """L's even elements are written; the gather reads the odd ones."""

    @T.prim_func
    def gather_bug(A: T.Tensor((256,), "int32"), B: T.Tensor((256,), "int32")):
        with T.Kernel(2, threads=64) as bx:
            L = T.alloc_local((8,), "int32")
            tx = T.get_thread_binding()
            for i in T.vectorized(4):
                L[i * 2] = A[bx * 128 + tx * 2 + i]
            for i in T.vectorized(4):
                B[bx * 128 + tx * 4 + i] = L[i * 2 + 1]

    return gather_bug


def selected_unwritten():
    """L[0:2] are written; every lane takes L (A > -1000 always), so lane 2 uses the unwritten L[2]."""

    @T.prim_func
    def select_bug(A: T.Tensor((256,), "int32"), B: T.Tensor((256,), "int32")):
        with T.Kernel(2, threads=32) as bx:
            L = T.alloc_local((4,), "int32")
            tx = T.get_thread_binding()
            for i in T.vectorized(2):
                L[i] = A[bx * 128 + tx * 4 + i]
            for i in T.vectorized(4):
                B[bx * 128 + tx * 4 + i] = T.Select(A[bx * 128 + tx * 4 + i] > -1000, L[i], 7)

    return select_bug


PLANTED = {
    # name: (program, the load's snippet in the kernel source, the message's buffer and element)
    "gather": (gathered_unwritten, "tl::gather(L", r"load of `L` at element 1"),
    "select": (selected_unwritten, "tl::select(", r"load of `L` at element 2"),
}


@pytest.mark.parametrize("kind", list(PLANTED))
@pytest.mark.parametrize("arch", ARCHS)
def test_an_unwritten_element_read_through_a_vector_form_is_named(arch, kind, monkeypatch):
    program, snippet, what = PLANTED[kind]
    kernel = tilelang.compile(program(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert snippet in source and "tl_sim::" not in source and "_defined" not in source  # the MUSA C is unchanged
    a = ints(256, 1)
    b = torch.full((256,), 12345, dtype=torch.int32)
    kernel(a, b)  # default mode: no check; the poison is read as -1
    assert (b == -1).any()
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    with pytest.raises(KernelLaunchError) as info:
        kernel(a, torch.full((256,), 12345, dtype=torch.int32))
    message = str(info.value)
    assert re.search(r"block \(0,0,0\), thread \(\d+,0,0\): uninitialised read: fragment/local " + what +
                     r", which this thread has not written", message), message
    line = int(re.search(r"\(line (\d+) of the kernel source;", message).group(1))
    assert line == line_of(source, snippet)
    assert "test_uninit_lane_reads.py:" in message and "in the user's source" in message, message


def written_lanes_only():
    """Each vector form reads only written elements in the lanes that keep their value, and unwritten ones in the
    others: L[2:4] and the odd elements of G are never written."""

    @T.prim_func
    def lanes_ok(A: T.Tensor((256,), "int32"), B: T.Tensor((256,), "int32"), C: T.Tensor((256,), "int32"),
                 D: T.Tensor((256,), "int32"), E: T.Tensor((256,), "int32")):
        with T.Kernel(2, threads=32) as bx:
            L = T.alloc_local((4,), "int32")
            M = T.alloc_local((4,), "int32")
            G = T.alloc_local((8,), "int32")
            H = T.alloc_local((4,), "int32")
            S = T.alloc_local((4,), "int32")
            tx = T.get_thread_binding()
            base = bx * 128 + tx * 4
            for i in T.vectorized(2):
                L[i] = A[base + i]
            # used: the lanes that take L (0, 1) read written elements
            for i in T.vectorized(4):
                B[base + i] = T.Select(i < 2, L[i], 7)
            # carried: M's lanes 0, 1 come from L's written elements, 2, 3 from the constant
            for i in T.vectorized(4):
                M[i] = T.Select(i < 2, L[i], 5)
            for i in T.vectorized(4):
                C[base + i] = M[i]
            # a gather of the written (even) elements, carried into H, then used
            for i in T.vectorized(4):
                G[i * 2] = A[base + i] * 3
            for i in T.vectorized(4):
                H[i] = G[i * 2]
            for i in T.vectorized(4):
                D[base + i] = H[i]
            # T.if_then_else carries its chosen branch: S starts unwritten, and every element takes A
            for i in T.serial(4):
                S[i] = T.if_then_else(A[base + i] > -1000, A[base + i] + 1, S[i])
            for i in T.serial(4):
                E[base + i] = S[i]

    return lanes_ok


@pytest.mark.parametrize("arch", ARCHS)
def test_lanes_that_read_written_elements_are_not_reported(arch, monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    kernel = tilelang.compile(written_lanes_only(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl::select(" in source and "tl::gather(G" in source  # the vector forms this test is about
    a = ints(256, 2)
    outs = [torch.full((256,), 999, dtype=torch.int32) for _ in range(4)]
    kernel(a, *outs)
    lane = torch.arange(256) % 4
    torch.testing.assert_close(outs[0], torch.where(lane < 2, a, 7))
    torch.testing.assert_close(outs[1], torch.where(lane < 2, a, 5))
    torch.testing.assert_close(outs[2], a * 3)
    torch.testing.assert_close(outs[3], a + 1)


def test_the_checked_print_carries_each_lane():
    from tilelang_musa.codegen import generate
    from tilelang_musa.target import determine_target
    from tilelang_musa.transform import lower
    from tilelang_musa.transform.split_kernels import split_kernels

    target = determine_target("musa -arch=mp_31")
    funcs = [lower(kernel, target, {}) for kernel in split_kernels(written_lanes_only())]
    source = generate(funcs, target, "lanes", sim_checks=True)
    checked = source.checked_text
    # the select's store: lane l carries the chosen branch's lane l
    assert re.search(r"for \(int tl_sim_lane = 0; tl_sim_lane < 4; \+\+tl_sim_lane\) M_defined\[\(0\) \+ tl_sim_lane\] "
                     r"= \(\(.*\)\.data\[tl_sim_lane\] \? L_defined\[\(0\) \+ tl_sim_lane\] : 1\);", checked), checked
    # the gather's store: lane l carries G's element index[l]
    assert re.search(r"H_defined\[\(0\) \+ tl_sim_lane\] = "
                     r"G_defined\[\(tl::ramp<int, 4>\(0, 2\)\)\.data\[tl_sim_lane\]\]", checked), checked
    # the select used: L's loads are checked in the lanes that take them
    assert "tl_sim::UseLocalWhere(L_defined, 0, 4, tl_sim::Taking(tl_sim_lanes0, true)" in checked, checked
    # the if_then_else store carries the chosen branch
    assert re.search(r"S_defined\[i(_\d+)?\] = \(\(.*\) \? 1 : S_defined\[i(_\d+)?\]\);", checked), checked
    assert len(checked.splitlines()) == len(source.text.splitlines())
    assert "_defined" not in source.text and "tl_sim" not in source.text
