"""RemoveUnusedBinds: a binding nothing reads is dropped, unless computing its value calls something; the kernels
that T.use_swizzle remaps (whose bindings StmtSimplify substitutes away) print no unused variable."""

import re

import pytest
import torch
import tvm
from tvm import tirx

import tilelang
import tilelang.language as T
from conftest import rand
from tilelang_musa.transform.remove_unused_binds import remove_unused_binds

Var = tvm.ir.expr.Var


def call(name, *args):
    return tirx.Evaluate(tirx.call_extern("int32", name, *args))


def test_an_unread_binding_is_dropped_and_a_read_one_kept():
    a, x, y = Var("a", "int32"), Var("x", "int32"), Var("y", "int32")
    before = tirx.SeqStmt([tirx.Bind(x, a + 1), tirx.Bind(y, a * 2), call("use", y)])
    expected = tirx.SeqStmt([tirx.Bind(y, a * 2), call("use", y)])
    tvm.ir.assert_structural_equal(remove_unused_binds(before), expected)


def test_a_binding_whose_value_calls_something_is_kept():
    a, x = Var("a", "int32"), Var("x", "int32")
    before = tirx.SeqStmt([tirx.Bind(x, tirx.call_extern("int32", "side_effect", a)), call("use", a)])
    tvm.ir.assert_structural_equal(remove_unused_binds(before), before)


def test_bindings_inside_loops_are_dropped_and_a_sequence_of_one_collapses():
    a, i, x = Var("a", "int32"), Var("i", "int32"), Var("x", "int32")
    before = tirx.For(i, 0, 4, tirx.ForKind.SERIAL, tirx.SeqStmt([tirx.Bind(x, a + i), call("use", i)]))
    expected = tirx.For(i, 0, 4, tirx.ForKind.SERIAL, call("use", i))
    tvm.ir.assert_structural_equal(remove_unused_binds(before), expected)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_rasterized_kernel_declares_no_unused_variable(arch):
    @T.prim_func
    def copy_through_shared(A: T.Tensor((160, 640), "float32"), B: T.Tensor((160, 640), "float32")):
        with T.Kernel(10, 10, threads=128) as (bx, by):
            T.use_swizzle(panel_size=4)
            S = T.alloc_shared((16, 64), "float32")
            T.copy(A[by * 16, bx * 64], S)
            T.copy(S, B[by * 16, bx * 64])

    kernel = tilelang.compile(copy_through_shared, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    for name in re.findall(r"const \w+ (\w+) = ", source):
        assert len(re.findall(rf"\b{name}\b", source)) > 1, f"`{name}` is declared but never read:\n{source}"
    a = rand((160, 640), torch.float32, 7)
    b = torch.full((160, 640), float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, a)
