"""A Python loop in a kernel whose condition or iterator is Python's runs while the kernel is traced (unrolled). One
that never ends was a hang of the frontend: `while True:` with no `break` is now an error at its line when the kernel
is defined (a kernel's loop cannot break out at run time, as with `T.While(True)`); any other static `while`, or a
`for` over a Python iterator (or a container the body keeps growing), that runs past STATIC_LOOP_LIMIT iterations
is an error at the loop's line. Static
loops that end keep Python semantics, and a `while` over a run-time condition is the TIR loop."""

import itertools

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import line_of, poison, rand
from tilelang.errors import EndlessLoopError
from tilelang_musa.language import runtime

ARCHS = ["mp_31", "mp_22"]


def _while_true():
    @T.prim_func
    def main(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=4) as bx:
            while True:  # the line
                A[bx] = A[bx] + 1.0

    return main


def _while_one_with_continue():
    @T.prim_func
    def main(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=4) as bx:
            while 1:  # the line
                A[bx] = A[bx] + 1.0
                continue

    return main


def _static_condition_never_changes():
    n = 3

    @T.prim_func
    def main(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=4) as bx:
            while n > 0:  # the line
                A[bx] = 1.0

    return main


def _endless_iterator():
    @T.prim_func
    def main(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=4) as bx:
            for k in itertools.count():  # the line
                A[bx] = 1.0

    return main


def _growing_list():
    @T.prim_func
    def main(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=4) as bx:
            items = [1.0]
            for x in items:  # the line
                items.append(x)
                A[bx] = x

    return main


@pytest.mark.parametrize("build, message", [
    (_while_true, r"`while True:` never ends: its condition is always true and its body has no `break`"),
    (_while_one_with_continue, r"`while 1:` never ends"),
    (_static_condition_never_changes, r"this `while` loop has run 64 iterations while the kernel was traced"),
    (_endless_iterator, r"this `for` loop over a Python iterable has run 64 iterations"),
    (_growing_list, r"this `for` loop over a Python iterable has run 64 iterations"),
])
def test_a_python_loop_that_never_ends_is_an_error_at_its_line(build, message, monkeypatch):
    assert runtime.STATIC_LOOP_LIMIT == 1 << 16
    monkeypatch.setattr(runtime, "STATIC_LOOP_LIMIT", 64)  # the same check, sooner
    with pytest.raises(EndlessLoopError, match=message) as info:
        build()
    assert info.value.loc.lineno == line_of(build, "# the line")
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, ValueError)  # upstream's class, and ours


@pytest.mark.parametrize("arch", ARCHS)
def test_static_loops_that_end_are_unrolled_and_a_runtime_while_is_a_loop(arch):
    """`while True:` left by a static `break`, a static countdown and a finite generator unroll while tracing;
    `while x < 8:` over a T.alloc_var is the TIR loop."""
    def powers():
        yield from (1.0, 2.0)

    @T.prim_func
    def main(A: T.Tensor((32,), T.float32), B: T.Tensor((32,), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            tx = T.get_thread_binding()
            acc = T.alloc_var(T.float32, A[tx])
            k = 0
            while True:
                if k == 2:
                    break
                acc = acc * 2.0
                k += 1
            n = 2
            while n > 0:
                acc = acc + 1.0
                n -= 1
            for p in powers():
                acc = acc + p
            x = T.alloc_var(T.int32, 0)
            while x < 8:
                x = x + 3
            B[tx] = acc + T.cast(x, T.float32)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "while (x < 8) {" in source, source
    a, b = rand((32,), torch.float32, seed=11), poison((32,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a * 4 + 2 + 3 + 9)
