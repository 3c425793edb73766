"""A `T.prim_func` with no kernel (no `T.Kernel`, no thread binding), written to build and inspect IR, as upstream's
and Moore Threads' IR tests write them: `T.evaluate`, shared tiles, fragments and local buffers outside every kernel
build, print and compare structurally; compiling such a function is the error, at the construct's line. A function
whose kernel opens before or after such a statement is rejected when it is defined, as before; a kernel-less function
of plain statements compiles as it did (one thread of one block). The decision is the IR's (ir/outside_kernel.py), so
the same programs built by TVM's own TVMScript parser take the same path, with the same errors."""

import pytest
import torch
import tvm
from tvm.script import tirx as S

import tilelang
import tilelang.language as T
from conftest import line_of, poison, rand
from tilelang.errors import CompileError

ARCHS = ["mp_31", "mp_22"]


def _unswitched():
    """Moore Threads' transform/loop_unswitching `expected`: `T.evaluate(0)` in a loop outside every kernel."""
    @T.prim_func
    def main(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32), cond: T.Tensor((1,), T.int32)):
        if cond[0] > 0:
            for i in range(128):
                B[i] = A[i]
        else:
            for _i in range(128):
                T.evaluate(0)  # the line

    return main


def _fragments():
    """Their issue/merge_if program: fragments with no kernel after them."""
    @T.prim_func
    def main():
        A = T.alloc_fragment((1,), T.float16)  # the line
        B = T.alloc_fragment((1,), T.float16)
        if A[0] == 0:
            A[0] = 0
        if B[0] == 0:
            B[0] = 0

    return main


def _shared_tiles():
    """Their language/frontend_v2 test_dtype_str_repr: shared buffers of many dtypes, nothing else."""
    @T.prim_func
    def main():
        b1 = T.alloc_buffer((2,), dtype=T.bool, scope="shared")  # the line  # noqa: F841
        b2 = T.alloc_buffer((2,), dtype=T.int64, scope="shared")  # noqa: F841
        b3 = T.alloc_buffer((2,), dtype=T.float8_e4m3fn, scope="shared")  # noqa: F841

    return main


def _local_in_a_loop():
    """A local array allocated inside a loop of a function with no kernel: allocated where it is written."""
    @T.prim_func
    def main(A: T.Tensor((4,), T.float32)):
        for i in range(4):
            t = T.alloc_local((2,), T.float32)  # the line
            t[1] = A[i] * 2
            A[i] = t[1]

    return main


def _var_with_init():
    @T.prim_func
    def main(A: T.Tensor((4,), T.int32)):
        n = T.alloc_var(T.int32, 3)  # the line
        A[0] = n

    return main


@pytest.mark.parametrize("build, text", [
    (_unswitched, "T.evaluate(0)"),
    (_fragments, "if A == T.float16(0.0)"),
    (_shared_tiles, 'b3 = T.alloc_shared((2,), "float8_e4m3fn")'),
    (_local_in_a_loop, "    for i in range(4):\n        t = T.alloc_local((2,))"),
    (_var_with_init, "n: T.int32 = 3"),
])
def test_ir_only_function_builds_prints_and_compares(build, text):
    func = build()
    assert text in func.script(), func.script()
    tvm.ir.assert_structural_equal(func, build())
    mod = tvm.IRModule.from_expr(func.with_attr("global_symbol", "main"))
    tvm.ir.assert_structural_equal(mod["main"].body, func.body)


def test_ir_only_allocations_are_the_functions_own_at_its_top():
    func = _fragments()
    first, second = func.body.seq[0], func.body.seq[1]
    assert isinstance(first, tvm.tirx.AllocBuffer) and first.buffer.name == "A"
    assert isinstance(second, tvm.tirx.AllocBuffer) and second.buffer.ty.storage_scope == "local.fragment"
    var = _var_with_init().body.seq
    assert isinstance(var[0], tvm.tirx.AllocBuffer) and isinstance(var[1], tvm.tirx.BufferStore)


def test_source_lines_are_not_part_of_the_ir():
    """Two IR-only functions that differ only in where they were written are structurally equal."""
    def unswitched_elsewhere():
        @T.prim_func
        def main(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32), cond: T.Tensor((1,), T.int32)):

            if cond[0] > 0:
                for i in range(128):
                    B[i] = A[i]
            else:
                for _i in range(128):

                    T.evaluate(0)

        return main

    tvm.ir.assert_structural_equal(_unswitched(), unswitched_elsewhere())


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("build, construct", [
    (_unswitched, "T.evaluate"),
    (_fragments, "T.alloc_fragment"),
    (_shared_tiles, "T.alloc_shared"),
    (_local_in_a_loop, "T.alloc_local"),
    (_var_with_init, "T.alloc_var"),
])
def test_compiling_an_ir_only_function_is_an_error_at_the_line(build, construct, arch):
    func = build()
    for compile_it in (tilelang.compile, tilelang.lower):
        with pytest.raises(CompileError, match=rf"`{construct}` must be used inside `with T.Kernel\(\.\.\.\)`.*"
                                               r"`main` has no kernel") as info:
            compile_it(func, target=f"musa -arch={arch}")
        assert info.value.loc.lineno == line_of(build, "# the line")
    with pytest.raises(CompileError, match=r"has no kernel"):  # the same program under another name, renamed
        tilelang.compile(func.with_attr("global_symbol", "renamed"), target=f"musa -arch={arch}")


def _evaluate_before_the_kernel():
    @T.prim_func
    def main(A: T.Tensor((4,), T.float32)):
        T.evaluate(0)  # the line
        with T.Kernel(1, threads=4) as bx:
            A[bx] = 1.0

    return main


def _fragment_in_a_loop_before_the_kernel():
    @T.prim_func
    def main(A: T.Tensor((4,), T.float32)):
        for i in range(2):
            F = T.alloc_fragment((4,), T.float32)  # the line  # noqa: F841
        with T.Kernel(1, threads=4) as bx:
            A[bx] = 1.0

    return main


def _evaluate_after_the_kernel():
    @T.prim_func
    def main(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=4) as bx:
            A[bx] = 1.0
        T.evaluate(0)  # the line

    return main


@pytest.mark.parametrize("build, construct", [
    (_evaluate_before_the_kernel, "T.evaluate"),
    (_fragment_in_a_loop_before_the_kernel, "T.alloc_fragment"),
    (_evaluate_after_the_kernel, "T.evaluate"),
])
def test_outside_the_kernel_of_a_kernel_program_is_an_error_when_defined(build, construct):
    with pytest.raises(CompileError, match=rf"`{construct}` must be used inside `with T.Kernel") as info:
        build()
    assert info.value.loc.lineno == line_of(build, "# the line")


@pytest.mark.parametrize("arch", ARCHS)
def test_kernel_less_plain_statements_compile_as_before(arch):
    """Plain loads and stores with no kernel compile as they did: one thread of one block."""
    @T.prim_func
    def main(A: T.Tensor((16,), T.float32), B: T.Tensor((16,), T.float32)):
        for i in range(16):
            B[i] = A[15 - i] + 1.0

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "__launch_bounds__(1, 1)" in source and "B[i] = A[15 - i] + 1.000000e+00f;" in source, source
    a, b = rand((16,), torch.float32, seed=3), poison((16,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.flip(0) + 1)


# ---- the same programs built by TVM's own TVMScript parser (no side record: the IR decides) ----------------------


def _ts_fragments():
    @S.prim_func
    def main():
        A = S.alloc_buffer((1,), "float16", scope="local.fragment")  # the line
        if A[0] == S.float16(0):
            A[0] = S.float16(0)

    return main


def _ts_shared_tiles():
    @S.prim_func
    def main():
        b1 = S.alloc_buffer((2,), "bool", scope="shared.dyn")  # the line  # noqa: F841
        b2 = S.alloc_buffer((2,), "int64", scope="shared")  # noqa: F841

    return main


def _ts_local_in_a_loop():
    @S.prim_func
    def main(A: S.Buffer((4,), "float32")):
        for i in range(4):
            t = S.alloc_buffer((2,), "float32", scope="local")  # the line
            t[1] = A[i] * S.float32(2)
            A[i] = t[1]

    return main


def _ts_var():
    @S.prim_func
    def main(A: S.Buffer((4,), "int32")):
        n = S.alloc_buffer((1,), "int32", scope="local.var")  # the line
        n[0] = 3
        A[0] = n[0]

    return main


def _ts_unswitched():
    @S.prim_func
    def main(A: S.Buffer((128,), "float32"), B: S.Buffer((128,), "float32"), cond: S.Buffer((1,), "int32")):
        if cond[0] > 0:
            for i in range(128):
                B[i] = A[i]
        else:
            for _i in range(128):
                S.evaluate(0)  # the line

    return main


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("build, construct", [
    (_ts_fragments, "T.alloc_fragment"),
    (_ts_shared_tiles, "T.alloc_shared"),
    (_ts_local_in_a_loop, "T.alloc_local"),
    (_ts_var, "T.alloc_var"),
    (_ts_unswitched, "T.evaluate"),
])
def test_compiling_a_tvmscript_kernel_less_function_is_the_same_error(build, construct, arch):
    func = build()
    for compile_it in (tilelang.compile, tilelang.lower):
        with pytest.raises(CompileError, match=rf"`{construct}` must be used inside `with T.Kernel\(\.\.\.\)`.*"
                                               r"`main` has no kernel") as info:
            compile_it(func, target=f"musa -arch={arch}")
        if build is _ts_unswitched:  # TVM's parser gives an Evaluate no span: the line is not known
            assert info.value.loc is None
        else:
            assert info.value.loc is not None and info.value.loc.lineno == line_of(build, "# the line")


@pytest.mark.parametrize("ours, theirs", [(_unswitched, _ts_unswitched), (_local_in_a_loop, _ts_local_in_a_loop)])
def test_both_spellings_of_one_program_are_one_ir_and_one_error(ours, theirs):
    tvm.ir.assert_structural_equal(ours().body, theirs().body, map_free_vars=True)
    messages = []
    for build in (ours, theirs):
        with pytest.raises(CompileError) as info:
            tilelang.compile(build(), target="musa -arch=mp_31")
        messages.append(str(info.value).split("\n")[-1])
    assert messages[0] == messages[1], messages


@pytest.mark.parametrize("arch", ARCHS)
def test_a_tvmscript_kernel_less_function_of_plain_statements_compiles(arch):
    """Loads, stores, loops and a branch with no launch: one thread of one block, as with the frontend."""
    @S.prim_func
    def main(A: S.Buffer((16,), "float32"), B: S.Buffer((16,), "float32")):
        for i in range(16):
            if i < 8:
                B[i] = A[15 - i] + S.float32(1)
            else:
                B[i] = A[i] * S.float32(2)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "__launch_bounds__(1, 1)" in kernel.get_kernel_source()
    a, b = rand((16,), torch.float32, seed=5), poison((16,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, torch.cat([a.flip(0)[:8] + 1, a[8:] * 2]))


@pytest.mark.parametrize("arch", ARCHS)
def test_a_tvmscript_kernel_allocating_before_its_launch_compiles(arch):
    """A launch anywhere makes a kernel program: its allocations are the kernel's, not IR to inspect."""
    @S.prim_func
    def main(A: S.Buffer((64,), "float32"), B: S.Buffer((64,), "float32")):
        T_ = S.alloc_buffer((64,), "float32", scope="shared")
        tx = S.launch_thread("threadIdx.x", 64)
        T_[tx] = A[tx] * S.float32(3)
        B[tx] = T_[tx]

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    a, b = rand((64,), torch.float32, seed=9), poison((64,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a * 3)
