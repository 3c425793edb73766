"""`T.Tensor(..., scope=...)` (issue 38, upstream main's proxy): a tensor annotation may name the buffer's memory.
A kernel parameter declared in on-chip memory builds IR for passes to inspect (upstream main's VerifyBufferInit
test `test_silent_for_a_scoped_parameter_buffer` runs the pass on one); compiling it is a CompileError at the
parameter's line, since the launcher passes global memory. `scope="global"` is the plain tensor."""

import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang import tvm
from conftest import line_of, poison, rand
from tilelang_musa.diagnostics import TileLangWarning

ARCHS = ["mp_31", "mp_22"]
N = 64


def copy_from(scope):
    @T.prim_func
    def kernel(
        S: T.Tensor((N,), torch.float32, scope=scope),
        C: T.Tensor((N,), torch.float32),
    ):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(N):
                C[i] = S[i] * 2.0

    return kernel


@pytest.mark.parametrize("scope", ["shared.dyn", "shared", "local.fragment"])
def test_a_scoped_parameter_builds_ir_in_that_scope(scope, capfd):
    kernel = copy_from(scope)
    assert str(kernel.params[0].ty.storage_scope) == scope
    assert str(kernel.params[1].ty.storage_scope) == "global"
    tilelang.transform.VerifyBufferInit()(tvm.IRModule.from_expr(kernel))
    assert "Buffer read before initialization" not in capfd.readouterr().err  # the caller's to fill


@pytest.mark.parametrize("arch", ARCHS)
def test_compiling_a_scoped_parameter_is_an_error_at_its_line(arch):
    kernel = copy_from("shared.dyn")
    with pytest.raises(tilelang.CompileError,
                       match=r"tensor parameter `S` of `kernel` is declared in shared.dyn memory .*cannot be compiled") \
            as caught:
        tilelang.compile(kernel, target=f"musa -arch={arch}")
    assert caught.value.loc.lineno == line_of(copy_from, 'S: T.Tensor((N,), torch.float32, scope=scope)')
    with pytest.raises(tilelang.CompileError, match=r"declared in shared.dyn memory"):
        tilelang.lower(kernel, target=f"musa -arch={arch}")


@pytest.mark.parametrize("arch", ARCHS)
def test_global_scope_is_the_plain_tensor(arch):
    compiled = tilelang.compile(copy_from("global"), target=f"musa -arch={arch}")
    assert "float* __restrict__ S" in compiled.get_kernel_source()
    s, c = rand((N,), torch.float32, 21), poison((N,), torch.float32)
    compiled(s, c)
    torch.testing.assert_close(c, s * 2.0)


def test_strided_tensor_takes_a_scope_and_an_unknown_scope_is_refused():
    annotation = T.StridedTensor((4, 8), (16, 1), "float16", scope="shared.dyn")
    assert annotation.scope == "shared.dyn" and annotation.strides == (16, 1)
    with pytest.raises(ValueError, match=r"T.Tensor\(\.\.\., scope='texture'\): scope must be one of global, "):
        T.Tensor((4,), "float32", scope="texture")


def test_a_macro_parameter_annotated_with_a_scope_is_checked_against_it(monkeypatch):
    from tilelang_musa import diagnostics

    monkeypatch.setattr(diagnostics, "_WARNED", set())  # the warning is once per process and site

    @T.macro
    def double(s: T.Tensor((N,), "float32", scope="shared.dyn"), out: T.Tensor((N,), "float32")):
        for i in T.Parallel(N):
            out[i] = s[i] * 2.0

    def program(tile_scope):
        @T.prim_func
        def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=64):
                s = T.alloc_shared((N,), "float32") if tile_scope == "shared" else T.alloc_fragment((N,), "float32")
                T.copy(A, s)
                double(s, B)

        return main

    with warnings.catch_warnings():
        warnings.simplefilter("error", TileLangWarning)
        program("shared")  # a shared tile matches shared.dyn: no warning
    with pytest.warns(TileLangWarning, match=r"argument `s` \(s\) does not match its annotation: it is a "
                                             r"local.fragment buffer, not a shared.dyn one"):
        stale = program("fragment")
    a, b = rand((N,), torch.float32, 22), poison((N,), torch.float32)
    tilelang.compile(stale, target="musa -arch=mp_31")(a, b)
    torch.testing.assert_close(b, a * 2.0)
