"""HoistInvariantIf (upstream issue 1734): `for i: if c:` with `c` the same at every iteration becomes
`if c: for i:`; a condition that reads the loop variable, a buffer the loop writes, or a loop that may not run,
keeps its place."""

import pytest
import torch
import tvm
from tvm.script import tirx as S

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.transform.hoist_invariant_if import HoistInvariantIf

ARCHES = ["mp_31", "mp_22"]


def run(func):
    return HoistInvariantIf()(tvm.IRModule({"main": func}))["main"]


def test_an_invariant_condition_goes_outside_the_loop_and_an_else_case_gets_its_own_loop():
    @S.prim_func(private=True)
    def before(A: S.handle("float32", "global"), C: S.handle("float32", "global")):
        Ag = S.decl_buffer((8,), "float32", data=A)
        Cg = S.decl_buffer((2,), "float32", data=C)
        c = S.alloc_buffer((1,), "float32", scope="local")
        b = S.alloc_buffer((4,), "float32", scope="local")
        c[0] = Cg[0]
        for i in range(4):
            if c[0] >= S.float32(0):
                b[i] = Ag[i]
            else:
                b[i] = Ag[i + 4]

    @S.prim_func(private=True)
    def expected(A: S.handle("float32", "global"), C: S.handle("float32", "global")):
        Ag = S.decl_buffer((8,), "float32", data=A)
        Cg = S.decl_buffer((2,), "float32", data=C)
        c = S.alloc_buffer((1,), "float32", scope="local")
        b = S.alloc_buffer((4,), "float32", scope="local")
        c[0] = Cg[0]
        if c[0] >= S.float32(0):
            for i in range(4):
                b[i] = Ag[i]
        else:
            for i in range(4):
                b[i] = Ag[i + 4]

    tvm.ir.assert_structural_equal(run(before), expected, map_free_vars=True)


def test_a_condition_that_may_change_inside_the_loop_stays():
    @S.prim_func(private=True)
    def before(A: S.handle("float32", "global"), n: S.int32):
        Ag = S.decl_buffer((8,), "float32", data=A)
        c = S.alloc_buffer((1,), "float32", scope="local")
        b = S.alloc_buffer((4,), "float32", scope="local")
        for i in range(4):  # reads the loop variable
            if i < 2:
                b[i] = Ag[i]
        for i in range(4):  # reads what the loop writes
            if c[0] >= S.float32(0):
                c[0] = Ag[i]
        for i in range(4):  # a barrier in the loop: shared memory may change
            if Ag[0] >= S.float32(0):
                S.evaluate(S.call_intrin("int32", "tirx.tvm_storage_sync", "shared"))
        Av = S.decl_buffer((8,), "float32", data=A)
        for i in range(4):  # writes what the condition reads, through another view of A
            if Av[0] >= S.float32(0):
                Ag[i] = S.float32(1)
        for i in range(n):  # may not run: the condition would be evaluated where it was not
            if Ag[7] >= S.float32(0):
                b[0] = Ag[0]

    tvm.ir.assert_structural_equal(run(before), before)


def upstream_1734():
    @T.prim_func
    def main(A: T.Tensor[(2, 512), T.float32], B: T.Tensor[(2, 512), T.float32], C: T.Tensor[(2,), T.float32]):
        with T.Kernel(1, threads=256):
            A_local = T.alloc_fragment((2, 512), T.float32)
            B_local = T.alloc_fragment((2, 512), T.float32)
            C_local = T.alloc_fragment((2,), T.float32)
            T.copy(A, A_local)
            T.copy(C, C_local)
            T.clear(B_local)
            for i, j in T.Parallel(2, 512):
                if C_local[i] >= 0:
                    B_local[i, j] = A_local[i, j]
            T.copy(B_local, B)

    return main


@pytest.mark.parametrize("arch", ARCHES)
def test_upstreams_program_tests_once_and_matches_torch(arch):
    kernel = tilelang.compile(upstream_1734(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    guarded = source.index("if (0.000000e+00f <= C_local[0])")
    assert source.find("for (", guarded) > guarded and source.find("if (", guarded + 1) == -1  # tested once
    assert "  if (0.000000e+00f <= C_local[0]) {\n    for (int it_1 = 0; it_1 < 4; ++it_1) {\n" in source
    a, c = rand((2, 512), torch.float32, 1), torch.tensor([0.5, -0.5])
    for cs in (c, -c):
        b = poison((2, 512), torch.float32)
        kernel(a, b, cs)
        torch.testing.assert_close(b, torch.where(cs[:, None] >= 0, a, torch.zeros_like(a)))
