"""`with T.While(cond):` (TVMScript's while frame, which upstream's `tilelang.language` re-exports) runs its body while
`cond` holds, reading it again before each iteration: the same TIR `While` as `while cond:` in a kernel. A condition
that is always true (no `break` in a kernel: it never ends), a float or non-scalar one, or a T.While outside a kernel
are errors at their line."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import line_of
from tilelang.errors import CompileError

ARCHS = ["mp_31", "mp_22"]


def _collatz_steps(N, frame: bool):
    """Per thread: how many Collatz steps take A[i] to 1 (a data-dependent trip count)."""

    if frame:
        @T.prim_func
        def main(A: T.Tensor((N,), T.int32), Steps: T.Tensor((N,), T.int32)):
            with T.Kernel(1, threads=N):
                tx = T.get_thread_binding()
                x = T.alloc_var(T.int32, A[tx])
                steps = T.alloc_var(T.int32, 0)
                with T.While(x != 1):
                    if x % 2 == 0:
                        x = x // 2
                    else:
                        x = 3 * x + 1
                    steps += 1
                Steps[tx] = steps
    else:
        @T.prim_func
        def main(A: T.Tensor((N,), T.int32), Steps: T.Tensor((N,), T.int32)):
            with T.Kernel(1, threads=N):
                tx = T.get_thread_binding()
                x = T.alloc_var(T.int32, A[tx])
                steps = T.alloc_var(T.int32, 0)
                while x != 1:
                    if x % 2 == 0:
                        x = x // 2
                    else:
                        x = 3 * x + 1
                    steps += 1
                Steps[tx] = steps
    return main


def _collatz_reference(a):
    out = []
    for x in a.tolist():
        steps = 0
        while x != 1:
            x = x // 2 if x % 2 == 0 else 3 * x + 1
            steps += 1
        out.append(steps)
    return torch.tensor(out, dtype=torch.int32)


@pytest.mark.parametrize("arch", ARCHS)
def test_while_frame_runs_a_data_dependent_loop_as_python_while_does(arch):
    N = 64
    kernel = tilelang.compile(_collatz_steps(N, frame=True), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "while (x != 1) {" in source
    # The frame and a Python `while` are the same loop.
    assert source == tilelang.compile(_collatz_steps(N, frame=False), target=f"musa -arch={arch}").get_kernel_source()
    a = torch.randint(1, 2000, (N,), generator=torch.Generator().manual_seed(5), dtype=torch.int32)
    steps = torch.full((N,), -1, dtype=torch.int32)
    kernel(a, steps)
    torch.testing.assert_close(steps, _collatz_reference(a))


def _poll_until_nonzero():
    """Upstream's while_repro: a fragment state polled from global memory until it is nonzero; then a running sum
    over a shared row, stopped by a condition on a T.alloc_var."""

    @T.prim_func
    def main(flag: T.Tensor((1,), T.int32), X: T.Tensor((4, 32), T.float32), out: T.Tensor((4,), T.int32),
             total: T.Tensor((4,), T.float32)):
        with T.Kernel(4, threads=32) as bx:
            state = T.alloc_fragment((1,), T.int32)
            row = T.alloc_shared((32,), T.float32)
            T.copy(X[bx, 0:32], row)
            state[0] = 0
            with T.While(state[0] == 0):
                state[0] = flag[0]
            k = T.alloc_var(T.int32, 0)
            acc = T.alloc_var(T.float32, 0)
            with T.While(k < state[0] + bx):
                acc += row[k]
                k += 1
            out[bx] = state[0]
            total[bx] = acc

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_while_frame_polls_memory_and_reads_its_condition_each_iteration(arch):
    kernel = tilelang.compile(_poll_until_nonzero(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "while (state[0] == 0) {" in source
    assert "while (k < (state[0] + ((int)blockIdx.x))) {" in source
    g = torch.Generator().manual_seed(9)
    flag = torch.randint(3, 20, (1,), generator=g, dtype=torch.int32)
    x = torch.randn((4, 32), generator=g)
    out, total = torch.full((4,), -1, dtype=torch.int32), torch.full((4,), float("nan"))
    kernel(flag, x, out, total)
    n = int(flag[0])
    torch.testing.assert_close(out, torch.full((4,), n, dtype=torch.int32))
    expected = torch.stack([x[b, :n + b].sum() for b in range(4)])
    torch.testing.assert_close(total, expected, rtol=1e-5, atol=1e-5)


def _always_true():
    @T.prim_func
    def main(A: T.Tensor((4,), T.int32)):
        with T.Kernel(1, threads=4):
            with T.While(True):  # the line
                A[0] = 1

    return main


def _float_condition():
    @T.prim_func
    def main(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=4):
            with T.While(A[0]):  # the line
                A[0] = A[0] - 1.0

    return main


def _buffer_condition():
    @T.prim_func
    def main(A: T.Tensor((4,), T.int32)):
        with T.Kernel(1, threads=4):
            with T.While(A):  # the line
                A[0] = 0

    return main


def _outside_kernel():
    @T.prim_func
    def main(A: T.Tensor((4,), T.int32)):
        with T.While(A[0] > 0):  # the line
            A[0] = 0

    return main


@pytest.mark.parametrize("build, message", [
    (_always_true, r"T.While\(True\): the condition is always true, so the loop never ends"),
    (_float_condition, r"T.While: the condition must be a scalar boolean or integer expression; .*float32"),
    (_buffer_condition, r"T.While: the condition must be a scalar boolean or integer expression"),
    (_outside_kernel, r"`T.While` must be used inside `with T.Kernel"),
])
def test_while_frame_errors_name_the_construct_and_line(build, message):
    with pytest.raises(CompileError, match=message) as info:
        build()
    assert info.value.loc.lineno == line_of(build, "# the line")
