"""A pass's error reaches the user as the error that escaped the pass: a TileLangError the pass created and handled
itself (as a GEMM implementation declining on a LayoutError does) never stands in for a later, unrelated error."""

import pytest
import tvm
import tvm_ffi
from tvm import tirx
from tvm.script import tirx as T

import tilelang
from tilelang_musa.layout.layout import LayoutError
from tilelang_musa.transform.pass_base import run_pass, tl_pass


@T.prim_func
def ones(A: T.Buffer((4,), "float32")):
    for i in range(4):
        A[i] = 1.0


def run(on_loop):
    """Runs a pass whose structural-mutate callback (called through tvm-ffi) is `on_loop`."""
    body = lambda func: tvm_ffi.structural_mutate(func, [(tirx.For, lambda node, mutator: on_loop())])  # noqa: E731
    return run_pass(tl_pass("Probe", body), tvm.IRModule({"main": ones}))


def test_an_error_handled_inside_the_pass_does_not_replace_the_one_that_escapes():
    def on_loop():
        try:
            raise LayoutError("the SQMMA layout does not fit")  # a path declining, handled
        except LayoutError:
            pass
        raise ValueError("an unrelated bug")

    with pytest.raises(ValueError, match="an unrelated bug"):
        run(on_loop)


def test_the_error_that_escapes_keeps_its_type_and_message():
    raised = []

    def on_loop():
        raised.append(tilelang.CompileError("T.copy: shapes differ\n    ^", stage="Probe"))
        raise raised[-1]

    with pytest.raises(tilelang.CompileError) as info:
        run(on_loop)
    assert info.value is raised[0]
