"""Kernels nested as deeply as Python allows. CPython accepts at most 20 nested `for` / `while` / `with` / `try`
blocks in one function; the frontend's rewrite (parser.py) must not spend that budget on its own scaffolding. An
`if`/`elif` chain is a nest of `if`s, and Moore Threads' GDN prefill dispatches its producer warps through one
(`if tx < 768: ... elif tx < 832: ... elif ...`); the line scopes and the IR `if` used to open two or three blocks
a level, so that kernel stopped compiling once every statement got its line."""

import inspect

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand
from tilelang_musa.errors import CompileError

ARCHS = ["mp_22", "mp_31"]
BRANCHES = 14  # an elif chain of 14 IR conditions: 2 blocks a level (the old `with` + `for`) would need 28


def dispatch_chain():
    """Each group of 8 threads of a 128-thread block adds its own constant, chosen by a 14-way elif chain inside
    two loops; threads past the chain take the `else`."""

    @T.prim_func
    def chain(A: T.Tensor((4, 128), "float32"), B: T.Tensor((4, 128), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            for r in T.serial(2):
                for h in T.serial(2):
                    row = r * 2 + h
                    if tx < 8:
                        B[row, tx] = A[row, tx] + 1.0
                    elif tx < 16:
                        B[row, tx] = A[row, tx] + 2.0
                    elif tx < 24:
                        B[row, tx] = A[row, tx] + 3.0
                    elif tx < 32:
                        B[row, tx] = A[row, tx] + 4.0
                    elif tx < 40:
                        B[row, tx] = A[row, tx] + 5.0
                    elif tx < 48:
                        B[row, tx] = A[row, tx] + 6.0
                    elif tx < 56:
                        B[row, tx] = A[row, tx] + 7.0
                    elif tx < 64:
                        B[row, tx] = A[row, tx] + 8.0
                    elif tx < 72:
                        B[row, tx] = A[row, tx] + 9.0
                    elif tx < 80:
                        B[row, tx] = A[row, tx] + 10.0
                    elif tx < 88:
                        B[row, tx] = A[row, tx] + 11.0
                    elif tx < 96:
                        B[row, tx] = A[row, tx] + 12.0
                    elif tx < 104:
                        B[row, tx] = A[row, tx] + 13.0
                    elif tx < 112:
                        B[row, tx] = A[row, tx] + 14.0
                    else:
                        B[row, tx] = A[row, tx] * 2.0

    return chain


def chain_reference(a: torch.Tensor) -> torch.Tensor:
    out = a * 2.0
    for k in range(BRANCHES):
        out[:, 8 * k:8 * k + 8] = a[:, 8 * k:8 * k + 8] + (k + 1)
    return out


@pytest.mark.parametrize("arch", ARCHS)
def test_a_long_elif_chain_in_loops_builds_and_runs(arch):
    kernel = tilelang.compile(dispatch_chain(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert source.count("if (") >= BRANCHES  # one IR `if` per condition (nested else-ifs)
    a = rand((4, 128), torch.float32)
    b = torch.full_like(a, float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, chain_reference(a), rtol=0, atol=0)


def static_nest():
    """Eleven static loops and eleven static ifs interleaved (Python's meta-programming), around one store."""

    @T.prim_func
    def nest(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            for a in range(1):
                if a == 0:
                    for b in range(1):
                        if b == 0:
                            for c in range(1):
                                if c == 0:
                                    for d in range(1):
                                        if d == 0:
                                            for e in range(1):
                                                if e == 0:
                                                    for f in range(1):
                                                        if f == 0:
                                                            for g in range(1):
                                                                if g == 0:
                                                                    for h in range(1):
                                                                        if h == 0:
                                                                            for i in range(1):
                                                                                if i == 0:
                                                                                    B[tx] = A[tx] + (a + b + c + d + e + f + g + h + i + 0.5)

    return nest


@pytest.mark.parametrize("arch", ARCHS)
def test_nested_static_loops_and_ifs(arch):
    kernel = tilelang.compile(static_nest(), target=f"musa -arch={arch}")
    assert "+ 5.000000e-01f" in kernel.get_kernel_source() or "0.5f" in kernel.get_kernel_source()
    a = rand((128,), torch.float32)
    b = torch.full_like(a, float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, a + 0.5, rtol=0, atol=0)


def test_the_if_and_its_branches_keep_their_lines():
    """The flat `if` still scopes its statement: the IR if carries the `if`'s line, its branches their own (an
    `else if` is printed on the line of the `}` that closes the branch before it, under that if's line; a
    first branch statement on the line after its `if` needs no directive)."""
    kernel = tilelang.compile(dispatch_chain(), target="musa -arch=mp_31",
                              pass_configs={"tl.emit_line_directives": True})
    source = kernel.get_kernel_source()
    lines, first = inspect.getsourcelines(dispatch_chain)
    line_of = {snippet: first + next(k for k, text in enumerate(lines) if snippet in text)
               for snippet in ("if tx < 8:", "A[row, tx] * 2.0", "A[row, tx] + 14.0")}
    for snippet, line in line_of.items():
        assert f"#line {line} " in source, (snippet, line)


def too_deep():
    @T.prim_func
    def deep(A: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            for a in T.serial(1):
                for b in T.serial(1):
                    for c in T.serial(1):
                        for d in T.serial(1):
                            for e in T.serial(1):
                                for f in T.serial(1):
                                    for g in T.serial(1):
                                        for h in T.serial(1):
                                            for i in T.serial(1):
                                                for j in T.serial(1):
                                                    for k in T.serial(1):
                                                        for l in T.serial(1):  # noqa: E741
                                                            for m in T.serial(1):
                                                                for n in T.serial(1):
                                                                    for o in T.serial(1):
                                                                        for p in T.serial(1):
                                                                            for q in T.serial(1):
                                                                                for r in T.serial(1):
                                                                                    for s in T.serial(1):
                                                                                        A[0] = 1.0

    return deep


def test_nesting_beyond_python_is_a_named_error():
    """20 blocks of the user's own (a `with` and 19 loops, as deep as Python allows) around a statement, whose line
    scope is the 21st: a CompileError naming the kernel and the limit, not a bare SyntaxError from inside the
    frontend."""
    with pytest.raises(CompileError, match=r"kernel `deep` cannot be built: too many statically nested blocks"):
        too_deep()
