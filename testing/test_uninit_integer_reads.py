"""Uninitialised reads of integer, bool and FNUZ float8 fragments and locals, named in the simulator's checked mode
(issue 41).

An integer's poison (all-ones bytes) is a value, -1, so the float check (a NaN reaching a store) cannot see them; so
is a FNUZ float8's (0xFF is -240 in float8_e4m3fnuz, -57344 in float8_e5m2fnuz: their only NaN is 0x80) and a
bool's (the byte 0xFF, which g++ reads as true in a condition).
The checked print keeps a defined byte per element (`N_defined`, src/tl_templates/sim/sim/uninit_reads.h): a store
sets it from the elements its value was computed from, and a load is checked only where its value is used (an
index, a condition, a store to shared/global memory, a call), so a load whose value dies is never reported."""

import inspect
import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand
from tilelang_musa.ir.source_lines import user_lines
from tilelang_musa.launcher import KernelLaunchError

ARCHS = ["mp_22", "mp_31"]
HERE = inspect.getsourcefile(lambda: None)


def line_of(source: str, snippet: str) -> int:
    return next(number for number, text in enumerate(source.splitlines(), 1) if snippet in text)


def ints(n: int, seed: int, dtype=torch.int32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-50, 50, (n,), generator=g, dtype=torch.int64).to(dtype)


def fragment_never_written():
    @T.prim_func
    def int_fragment_bug(A: T.Tensor((256,), "int32"), B: T.Tensor((256,), "int32")):
        with T.Kernel(2, threads=128) as bx:
            F = T.alloc_fragment((128,), "int32")
            for i in T.Parallel(128):
                B[bx * 128 + i] = F[i] + A[bx * 128 + i]  # F is never written

    return int_fragment_bug


def local_never_written():
    @T.prim_func
    def int_local_bug(A: T.Tensor((256,), "int32"), B: T.Tensor((256,), "int32")):
        with T.Kernel(2, threads=128) as bx:
            L = T.alloc_local((2,), "int16")
            tx = T.get_thread_binding()
            L[0] = A[bx * 128 + tx]
            B[bx * 128 + tx] = L[0] + L[1]

    return int_local_bug


def local_carried_then_stored():
    """L[1] is never written; its value is carried into M[0] (not yet an error), which is then stored."""

    @T.prim_func
    def int_carried_bug(A: T.Tensor((256,), "int32"), B: T.Tensor((256,), "int32")):
        with T.Kernel(2, threads=128) as bx:
            L = T.alloc_local((2,), "uint8")
            M = T.alloc_local((2,), "int32")
            tx = T.get_thread_binding()
            L[0] = T.Cast("uint8", A[bx * 128 + tx] & 127)
            M[1] = T.Cast("int32", L[0])
            M[0] = T.Cast("int32", L[1]) * 3
            B[bx * 128 + tx] = M[1] - M[0]

    return int_carried_bug


def local_used_as_index():
    """An unwritten int8 local element used as an index: the load is named, before any memory is read through it."""

    @T.prim_func
    def int_index_bug(A: T.Tensor((256,), "int32"), B: T.Tensor((256,), "int32")):
        with T.Kernel(2, threads=128) as bx:
            J = T.alloc_local((4,), "int8")
            tx = T.get_thread_binding()
            J[0] = T.Cast("int8", tx % 64)
            B[bx * 128 + tx] = A[bx * 128 + (J[2] & 63)]

    return int_index_bug


def bool_local_never_written():
    @T.prim_func
    def bool_local_bug(A: T.Tensor((256,), "int32"), B: T.Tensor((256,), "int32")):
        with T.Kernel(2, threads=128) as bx:
            P = T.alloc_local((2,), "bool")
            tx = T.get_thread_binding()
            P[0] = A[bx * 128 + tx] > 0
            B[bx * 128 + tx] = T.if_then_else(P[1], 1, 2) + T.if_then_else(P[0], 10, 20)  # P[1] is never written

    return bool_local_bug


def fnuz_fragment_never_written(dtype):
    @T.prim_func
    def fnuz_fragment_bug(A: T.Tensor((256,), "int32"), B: T.Tensor((256,), "int32")):
        with T.Kernel(2, threads=128) as bx:
            F = T.alloc_fragment((128,), dtype)
            G = T.alloc_fragment((128,), dtype)
            for i in T.Parallel(128):
                F[i] = T.Cast(dtype, A[bx * 128 + i])
            for i in T.Parallel(128):
                B[bx * 128 + i] = T.Cast("int32", F[i]) - T.Cast("int32", G[i])  # G is never written

    return fnuz_fragment_bug


PLANTED = {
    # name: (program, the load's snippet in the kernel source, the message's buffer and element)
    "fragment": (fragment_never_written, "F", r"load of `F` at element 0"),
    "local": (local_never_written, "L[1]", r"load of `L` at element 1"),
    "carried": (local_carried_then_stored, "- M[0]", r"load of `M` at element 0"),
    "index": (local_used_as_index, "J[2]", r"load of `J` at element 2"),
    "bool": (bool_local_never_written, "P[1]", r"load of `P` at element 1"),
    "fragment-e4m3fnuz": (lambda: fnuz_fragment_never_written("float8_e4m3fnuz"), "G", r"load of `G` at element 0"),
    "fragment-e5m2fnuz": (lambda: fnuz_fragment_never_written("float8_e5m2fnuz"), "G", r"load of `G` at element 0"),
}


@pytest.mark.parametrize("kind", list(PLANTED))
@pytest.mark.parametrize("arch", ARCHS)
def test_a_planted_integer_uninitialised_read_is_named_in_checked_mode(arch, kind, monkeypatch):
    program, snippet, what = PLANTED[kind]
    kernel = tilelang.compile(program(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl_sim::" not in source and "_defined" not in source  # the MUSA C is unchanged
    a = ints(256, 1)
    b = torch.full((256,), 12345, dtype=torch.int32)
    kernel(a, b)  # default mode: no check; the poison is read as -1 (or 255, or an index the bounds check allows)
    assert not torch.equal(b, torch.full((256,), 12345, dtype=torch.int32))
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    with pytest.raises(KernelLaunchError) as info:
        kernel(a, torch.full((256,), 12345, dtype=torch.int32))
    message = str(info.value)
    assert re.search(r"block \(0,0,0\), thread \(\d+,0,0\): uninitialised read: fragment(/local)? " + what +
                     r", which this thread has not written", message), message
    line = int(re.search(r"\(line (\d+) of the kernel source[;)]", message).group(1))
    if kind.startswith("fragment"):
        assert snippet in source.splitlines()[line - 1]
    else:
        assert line == line_of(source, snippet)


@pytest.mark.parametrize("arch", ARCHS)
def test_the_report_names_the_users_line_with_line_directives(arch, monkeypatch):
    kernel = tilelang.compile(fragment_never_written(), target=f"musa -arch={arch}",
                              pass_configs={"tl.emit_line_directives": True})
    source = kernel.get_kernel_source(kernel_only=False)
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    with pytest.raises(KernelLaunchError) as info:
        kernel(ints(256, 2), torch.zeros(256, dtype=torch.int32))
    message = str(info.value)
    lines, first = inspect.getsourcelines(fragment_never_written)
    user = first + next(k for k, text in enumerate(lines) if "# F is never written" in text)
    generated = int(re.search(r"line (\d+) of the kernel source", message).group(1))
    assert user_lines(source)[generated] == (HERE, user)
    assert f"{HERE}:{user} in the user's source" in message, message


def written_locals_holding_the_poison_bytes():
    """Every element read is written first, many of them with -1 (int32, int8) or 255 (uint8): the poison's bytes.
    A dead load of an unwritten element (D[1] into D[0], then D[0] overwritten) is carried, never used."""

    @T.prim_func
    def int_locals_ok(A: T.Tensor((256,), "int32"), B: T.Tensor((256,), "int32"), C: T.Tensor((256,), "int8")):
        with T.Kernel(2, threads=128) as bx:
            N = T.alloc_local((4,), "int32")
            Q = T.alloc_local((2,), "int8")
            U = T.alloc_local((2,), "uint8")
            D = T.alloc_local((2,), "int32")
            tx = T.get_thread_binding()
            for k in T.serial(4):
                N[k] = A[bx * 128 + tx] * k - 1
            Q[0] = T.Cast("int8", N[0])
            U[0] = T.Cast("uint8", N[1] & 255)
            D[0] = D[1] + N[2]  # D[1] is never written: carried into D[0] ...
            D[0] = N[3]  # ... and overwritten before any use
            B[bx * 128 + tx] = N[Q[0] + 1] + T.Cast("int32", U[0]) + D[0]
            C[bx * 128 + tx] = Q[0]

    return int_locals_ok


@pytest.mark.parametrize("arch", ARCHS)
def test_written_integer_locals_and_dead_loads_are_not_reported(arch, monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    kernel = tilelang.compile(written_locals_holding_the_poison_bytes(), target=f"musa -arch={arch}")
    a = ints(256, 3)
    a[::3] = 0  # N[k] = -1 for every k
    b = torch.full((256,), 7777, dtype=torch.int32)
    c = torch.full((256,), 77, dtype=torch.int8)
    kernel(a, b, c)
    n = [a * k - 1 for k in range(4)]
    q = n[0].to(torch.int8)
    u = (n[1] & 255).to(torch.int64)
    picked = torch.stack(n)[(q.to(torch.int64) + 1).clamp(0, 3), torch.arange(256)]
    torch.testing.assert_close(b, (picked + u + n[3]).to(torch.int32))
    torch.testing.assert_close(c, q)


def bool_and_fnuz_locals_holding_the_poison_bytes():
    """Every element read is written first, many with the poison's bytes: true stored as a bool (P[0] where A > 0)
    and 0xFF, which is -240 in float8_e4m3fnuz and -57344 in float8_e5m2fnuz."""

    @T.prim_func
    def value_locals_ok(A: T.Tensor((256,), "int32"), B: T.Tensor((256,), "int32")):
        with T.Kernel(2, threads=128) as bx:
            P = T.alloc_local((2,), "bool")
            E4 = T.alloc_local((1,), "float8_e4m3fnuz")
            E5 = T.alloc_local((1,), "float8_e5m2fnuz")
            tx = T.get_thread_binding()
            P[0] = A[bx * 128 + tx] > 0
            P[1] = A[bx * 128 + tx] <= 0
            E4[0] = T.Cast("float8_e4m3fnuz", A[bx * 128 + tx] * 8)
            E5[0] = T.Cast("float8_e5m2fnuz", A[bx * 128 + tx] * 2048)
            B[bx * 128 + tx] = (T.if_then_else(P[0], 1, 0) + T.if_then_else(P[1], 100, 0) +
                                T.Cast("int32", E4[0]) * 1000 + T.Cast("int32", E5[0]))

    return value_locals_ok


@pytest.mark.parametrize("arch", ARCHS)
def test_bool_and_fnuz_locals_holding_the_poison_bytes_are_not_reported(arch, monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    kernel = tilelang.compile(bool_and_fnuz_locals_holding_the_poison_bytes(), target=f"musa -arch={arch}")
    a = torch.randint(-20, 20, (256,), generator=torch.Generator().manual_seed(7)).to(torch.int32)
    a[::4] = -28  # E4 = -224 and E5 = -57344: 0xFF in float8_e5m2fnuz
    a[1::4] = -30  # E4 = -240: 0xFF in float8_e4m3fnuz; E5 = -61440, beyond -57344: NaN (0x80)
    b = torch.full((256,), 4242, dtype=torch.int32)
    kernel(a, b)
    assert (torch.tensor([-240.0]).to(torch.float8_e4m3fnuz).view(torch.uint8) == 0xFF).all()
    assert (torch.tensor([-57344.0]).to(torch.float8_e5m2fnuz).view(torch.uint8) == 0xFF).all()
    e4 = (a * 8).float().to(torch.float8_e4m3fnuz).float()
    e5 = (a * 2048).float().to(torch.float8_e5m2fnuz).float()
    ok = ~torch.isnan(e5)  # a NaN converted to int32 is unspecified: compare the other lanes
    expected = (a > 0).int() + (a <= 0).int() * 100 + e4.int() * 1000 + torch.where(ok, e5, 0).int()
    torch.testing.assert_close(b[ok], expected[ok].to(torch.int32))


@pytest.mark.parametrize("arch", ARCHS)
def test_an_integer_fragment_reduced_into_shared_is_not_reported(arch):
    """The dead-load pattern of issue 41 with integers: threads outside the fragment's layout combine their unwritten
    slot with the all-reduce result and never store it; their value only flows into fragment elements."""
    from tilelang_musa.fuzz.families.reduce import ReduceDesc
    from tilelang_musa.fuzz.runner import check

    desc = ReduceDesc(kind="sum", reduced=8, kept=1, block=2, dim=1, clear=True, src_scope="fragment",
                      dst_scope="shared", dtype="int32", acc_dtype="int32", threads=32, data_seed=14672592, total=9)
    outcome = check(desc, arch)  # checked mode, against torch
    assert outcome.status == "pass", outcome.detail


def test_the_checked_print_tracks_integer_locals_and_leaves_the_musa_c_alone():
    from tilelang_musa.codegen import generate
    from tilelang_musa.target import determine_target
    from tilelang_musa.transform import lower
    from tilelang_musa.transform.split_kernels import split_kernels

    target = determine_target("musa -arch=mp_31")
    funcs = [lower(kernel, target, {}) for kernel in split_kernels(local_carried_then_stored())]
    source = generate(funcs, target, "carried", sim_checks=True)
    checked = source.checked_text
    # declared with its defined bytes, on the array's line (the checked print keeps the user's line numbers)
    assert re.search(r"unsigned char L\[2\]; tl_sim::Poison\(L\); unsigned char L_defined\[2\]; "
                     r"tl_sim::Undefine\(L_defined\);", checked), checked
    # a store carries the defined-ness of what it was computed from, in checked mode only
    assert "if (tl_sim::UninitChecked()) L_defined[0] = 1;" in checked, checked
    assert "if (tl_sim::UninitChecked()) M_defined[0] = L_defined[1];" in checked, checked
    # the carried loads are not checked; the stored ones are uses
    assert "UseLocal(L_defined" not in checked, checked
    assert len(re.findall(r'tl_sim::UseLocal\(M_defined, [01], 1, "fragment/local", "M", __LINE__\)', checked)) == 2
    assert len(checked.splitlines()) == len(source.text.splitlines())
    assert "_defined" not in source.text and "UseLocal" not in source.text


def int8_gemm(M=64, N=64, K=64):
    @T.prim_func
    def igemm(A: T.Tensor((M, K), "int8"), B: T.Tensor((K, N), "int8"), C: T.Tensor((M, N), "int32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, K), "int8")
            B_s = T.alloc_shared((K, N), "int8")
            C_f = T.alloc_fragment((M, N), "int32")
            T.clear(C_f)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C)

    return igemm


@pytest.mark.parametrize("arch", ARCHS)
def test_an_int8_gemm_accumulating_into_an_int32_fragment_is_not_reported(arch, monkeypatch):
    """The accumulator is cleared, then accumulated (`C_f[i] = C_f[i] + a * b`: carried, unchanged) and stored."""
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    kernel = tilelang.compile(int8_gemm(), out_idx=[2], target=f"musa -arch={arch}")
    a = ints(64 * 64, 4, torch.int8).view(64, 64)
    b = ints(64 * 64, 5, torch.int8).view(64, 64)
    torch.testing.assert_close(kernel(a, b), (a.to(torch.int64) @ b.to(torch.int64)).to(torch.int32))
