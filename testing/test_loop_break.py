"""`break` and `continue` in a kernel's loops. In a sequential IR loop (T.serial, range, a `while` over a run-time
condition) they are TIR's Break / Continue, under an `if` over a run-time condition too (upstream's deepseek_v32
top-k selector leaves its refinement rounds with `if l_new_topk <= 0: break`); in a Python iteration (a list, a
static `while`) they stay Python's, at trace time. A loop whose iterations are spread over threads or reordered
(T.Parallel, T.Pipelined, T.unroll, T.vectorized) cannot be left early: an error at the statement's line, as is a
`break` under a run-time condition in a Python loop."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import line_of
from tilelang.errors import CompileError

ARCHS = ["mp_31", "mp_22"]


def _first_above(M, N):
    """Per row: the column of the first element above the row's threshold (-1 if none), and how many elements
    below zero came before it (a `continue` skips the others)."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Limit: T.Tensor((M,), T.float32), Pos: T.Tensor((M,), T.int32),
             Negatives: T.Tensor((M,), T.int32)):
        with T.Kernel(1, threads=M):
            tx = T.get_thread_binding()
            pos = T.alloc_var(T.int32, -1)
            negatives = T.alloc_var(T.int32, 0)
            for j in T.serial(N):
                if X[tx, j] > Limit[tx]:
                    pos = j
                    break
                if X[tx, j] >= 0:
                    continue
                negatives += 1
            Pos[tx] = pos
            Negatives[tx] = negatives

    return main


def _first_above_reference(x, limit):
    pos, negatives = [], []
    for row, lim in zip(x.tolist(), limit.tolist()):
        p, n = -1, 0
        for j, v in enumerate(row):
            if v > lim:
                p = j
                break
            if v < 0:
                n += 1
        pos.append(p)
        negatives.append(n)
    return torch.tensor(pos, dtype=torch.int32), torch.tensor(negatives, dtype=torch.int32)


@pytest.mark.parametrize("arch", ARCHS)
def test_break_and_continue_under_run_time_conditions(arch):
    M, N = 64, 32
    kernel = tilelang.compile(_first_above(M, N), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "break;" in source and "continue;" in source
    gen = torch.Generator().manual_seed(11)
    x = torch.randn(M, N, generator=gen)
    limit = torch.rand(M, generator=gen) * 3  # some rows never go above theirs
    pos = torch.full((M,), 7, dtype=torch.int32)
    negatives = torch.full((M,), 7, dtype=torch.int32)
    kernel(x, limit, pos, negatives)
    ref_pos, ref_negatives = _first_above_reference(x, limit)
    assert (ref_pos == -1).any() and (ref_pos >= 0).any()
    torch.testing.assert_close(pos, ref_pos)
    torch.testing.assert_close(negatives, ref_negatives)


def _rounds(N, R):
    """Block-uniform rounds (the top-k selector's shape): each round subtracts one value from a shared budget
    between barriers; the rounds stop once the budget is spent."""

    @T.prim_func
    def main(X: T.Tensor((R + 1,), T.int32), Rounds: T.Tensor((N,), T.int32)):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            budget = T.alloc_shared([1], T.int32)
            left = T.alloc_var(T.int32)
            done = T.alloc_var(T.int32, 0)
            if tx == 0:
                budget[0] = X[0]
            T.sync_threads()
            left = budget[0]
            for r in T.serial(R):
                if left <= 0:
                    break
                T.sync_threads()
                if tx == 0:
                    budget[0] = budget[0] - X[r + 1]
                T.sync_threads()
                left = budget[0]
                done += 1
            Rounds[tx] = done

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_break_leaves_a_loop_of_barriers_alike_in_every_thread(arch):
    N, R = 64, 6
    kernel = tilelang.compile(_rounds(N, R), target=f"musa -arch={arch}")
    assert "break;" in kernel.get_kernel_source()
    gen = torch.Generator().manual_seed(3)
    for _ in range(2):
        x = torch.randint(1, 10, (R + 1,), generator=gen, dtype=torch.int32)
        rounds = torch.full((N,), -1, dtype=torch.int32)
        kernel(x, rounds)
        left, expected = int(x[0]), 0
        for r in range(R):
            if left <= 0:
                break
            left -= int(x[r + 1])
            expected += 1
        assert rounds.tolist() == [expected] * N


def _while_break(N):
    @T.prim_func
    def main(A: T.Tensor((N,), T.int32), Steps: T.Tensor((N,), T.int32)):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            x = T.alloc_var(T.int32, A[tx])
            steps = T.alloc_var(T.int32, 0)
            while x != 1:
                if steps == 20:
                    break
                x = T.if_then_else(x % 2 == 0, x // 2, 3 * x + 1)
                steps += 1
            Steps[tx] = steps

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_break_in_a_run_time_while(arch):
    N = 64
    kernel = tilelang.compile(_while_break(N), target=f"musa -arch={arch}")
    assert "break;" in kernel.get_kernel_source()
    a = torch.randint(1, 500, (N,), generator=torch.Generator().manual_seed(5), dtype=torch.int32)
    steps = torch.full((N,), -1, dtype=torch.int32)
    kernel(a, steps)
    expected = []
    for x in a.tolist():
        s = 0
        while x != 1 and s < 20:
            x = x // 2 if x % 2 == 0 else 3 * x + 1
            s += 1
        expected.append(s)
    assert steps.tolist() == expected


def test_python_iteration_keeps_python_break_and_continue():
    """Over a list the loop is unrolled while tracing: a static `break` / `continue` leaves it then, so only the
    statements of the iterations before it are built."""

    @T.prim_func
    def main(A: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=1):
            for k in [0, 1, 2, 3, 4, 5]:
                if k == 1:
                    continue
                if k == 4:
                    break
                A[k] = A[k] + 1.0

    source = tilelang.compile(main, target="musa -arch=mp_31").get_kernel_source()
    body = source.split("__global__")[1]
    assert "break" not in body and "continue" not in body
    assert [f"A[{k}]" in body for k in range(6)] == [True, False, True, True, False, False]
    a = torch.randn(8)
    expected = a.clone()
    expected[[0, 2, 3]] += 1
    tilelang.compile(main, target="musa -arch=mp_31")(a)
    torch.testing.assert_close(a, expected)


def test_break_in_a_parallel_loop_is_an_error_at_its_line():
    def build():
        @T.prim_func
        def main(A: T.Tensor((128,), T.float32)):
            with T.Kernel(1, threads=128):
                for i in T.Parallel(128):
                    if A[i] > 0:
                        break  # the parallel loop
                    A[i] = 0.0

        return main

    with pytest.raises(CompileError, match=r"`break` inside T.Parallel: only a sequential loop") as err:
        build()
    assert err.value.loc.lineno == line_of(build, "break  # the parallel loop")


def test_run_time_break_of_a_python_loop_is_an_error_at_its_line():
    def build():
        @T.prim_func
        def main(A: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=1):
                for k in [0, 1, 2, 3]:
                    if A[k] > 0:
                        break  # the Python loop
                    A[k] = 1.0

        return main

    with pytest.raises(CompileError, match=r"`break` under a run-time condition leaves a Python loop") as err:
        build()
    assert err.value.loc.lineno == line_of(build, "break  # the Python loop")


def test_return_under_a_run_time_condition_is_still_an_error():
    def build():
        @T.prim_func
        def main(A: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=1):
                for k in T.serial(4):
                    if A[k] > 0:
                        return
                    A[k] = 1.0

        return main

    with pytest.raises(CompileError, match="condition must be known at compile time"):
        build()


def test_a_break_some_threads_take_before_a_barrier_is_reported_by_the_simulator():
    """The others wait at the barrier the leaving threads never reach: a deadlock on a card, an error here."""

    @T.prim_func
    def main(X: T.Tensor((64,), T.int32), Out: T.Tensor((64,), T.int32)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            s = T.alloc_shared([64], T.int32)
            acc = T.alloc_var(T.int32, 0)
            for r in T.serial(4):
                if X[tx] < r:
                    break
                s[tx] = r
                T.sync_threads()
                acc += s[(tx + 1) % 64]
                T.sync_threads()
            Out[tx] = acc

    kernel = tilelang.compile(main, target="musa -arch=mp_31")
    x = torch.randint(0, 4, (64,), generator=torch.Generator().manual_seed(2), dtype=torch.int32)
    with pytest.raises(Exception, match="divergent __syncthreads"):
        kernel(x, torch.zeros(64, dtype=torch.int32))


def _first_above_loop_break(M, N):
    """_first_above's search written with upstream's T.loop_break() (TileOPs' MUSA top-k selector spells its
    `if l_new_topk <= 0: break` so)."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Limit: T.Tensor((M,), T.float32), Pos: T.Tensor((M,), T.int32)):
        with T.Kernel(1, threads=M):
            tx = T.get_thread_binding()
            pos = T.alloc_var(T.int32, -1)
            for j in T.serial(N):
                if X[tx, j] > Limit[tx]:
                    pos = j
                    T.loop_break()
            Pos[tx] = pos

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_t_loop_break_is_break(arch):
    M, N = 64, 32
    kernel = tilelang.compile(_first_above_loop_break(M, N), target=f"musa -arch={arch}")
    assert "break;" in kernel.get_kernel_source()
    gen = torch.Generator().manual_seed(12)
    x = torch.randn(M, N, generator=gen)
    limit = torch.rand(M, generator=gen) * 3
    pos = torch.full((M,), 7, dtype=torch.int32)
    kernel(x, limit, pos)
    ref_pos, _ = _first_above_reference(x, limit)
    assert (ref_pos == -1).any() and (ref_pos >= 0).any()
    torch.testing.assert_close(pos, ref_pos)


def test_t_loop_break_outside_a_loop_or_in_a_parallel_loop_is_an_error_at_its_line():
    def outside():
        @T.prim_func
        def main(A: T.Tensor((128,), T.float32)):
            with T.Kernel(1, threads=128):
                if A[0] > 0:
                    T.loop_break()  # no loop

        return main

    def parallel():
        @T.prim_func
        def main(A: T.Tensor((128,), T.float32)):
            with T.Kernel(1, threads=128):
                for i in T.Parallel(128):
                    if A[i] > 0:
                        T.loop_break()  # the parallel loop

        return main

    with pytest.raises(CompileError, match=r"T.loop_break\(\) outside a loop of the kernel") as err:
        outside()
    assert err.value.loc.lineno == line_of(outside, "T.loop_break()  # no loop")
    with pytest.raises(CompileError, match=r"`break` inside T.Parallel: only a sequential loop") as err:
        parallel()
    assert err.value.loc.lineno == line_of(parallel, "T.loop_break()  # the parallel loop")
