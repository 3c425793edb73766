"""A barrier the compiler needs but cannot place names where it would go: the statement it would precede (or the
branch it would be in, its condition as written) and the branch's own line where it has one (every guard and loop
a T.Parallel is lowered to carries the loop's line, the inner guard of a loop that gives some threads one more
iteration too), else the nearest source line still known. Inside `if tx < 31:` (a T.Parallel(31) whose threads
exchange elements) no arch has one, since a barrier over part of a block counts whole warps (mp_31) or does not
exist (mp_22): before, mp_31's error named `T.sync_threads(1, 31)`, a barrier the user never wrote, with no line at
all. Under a per-thread condition none can go: the error named `if cond:` (a name of ThreadSync's own) and, with no
loop around it, no line."""

import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import CompileError

ARCHS = ["mp_31", "mp_22"]


def _neighbour_shift():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32):
            s = T.alloc_shared((64,), "float32")
            for i in T.Parallel(64):
                s[i] = A[i]
            T.sync_threads()  # the last line known before the exchange
            for i in T.Parallel(31):
                v = s[i + 1]  # thread i reads what thread i + 1 writes below: a barrier between, over threads 0..30
                s[i] = v * 2.0
            T.sync_threads()
            for i in T.Parallel(64):
                B[i] = s[i]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_an_unplaceable_barrier_names_its_statement_and_line(arch):
    with pytest.raises(CompileError) as err:
        tilelang.compile(_neighbour_shift(), target=f"musa -arch={arch}")
    text = str(err.value)
    # the T.Parallel's thread guard carries the loop's line: the error points there (its `if` and the line rendered)
    line = _neighbour_shift.__code__.co_firstlineno + 8
    assert (f"`if thread_x < 31` at {__file__}:{line} needs a barrier among its threads 0..30, before "
            "`s[thread_x] = v") in text, text
    assert err.value.loc is not None and (err.value.loc.filename, err.value.loc.lineno) == (__file__, line), text
    assert "for i in T.Parallel(31):" in text, text  # the line, rendered
    assert "the last one known at this stage" not in text, text
    assert "T.sync_threads(1, 31)" not in text, text
    why = "counts whole warps, and 31 threads" if arch == "mp_31" else "mp_22 has no barrier over part of a block"
    assert why in text, text


def _divergent_exchange():
    @T.prim_func
    def main(A: T.Tensor((32,), "int32"), B: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            s = T.alloc_shared((32,), "int32")
            x = T.alloc_var("int32")
            s[tx] = A[tx]
            T.sync_threads()  # the last line known before the branch
            x = A[tx]
            if x > s[1]:  # a per-thread condition: threads that skip the branch would never reach a barrier in it
                s[0] = x
                B[tx] = s[0] + 1

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_barrier_under_a_divergent_branch_names_the_condition_as_written_and_a_line(arch):
    """ThreadSync binds a condition's shared reads before its `if` (`cond = s[1] < x; if cond:`): the error shows
    the condition, not `cond`, and, with no loop around it, the last line known before it."""
    with pytest.raises(CompileError) as err:
        tilelang.compile(_divergent_exchange(), target=f"musa -arch={arch}")
    text = str(err.value)
    assert "`if s[1] < x[0]:` (in the code after the line shown" in text, text
    assert "writes and reads shared.dyn buffer `s`" in text, text
    assert err.value.loc is not None and err.value.loc.filename == __file__, text
    assert "T.sync_threads()  # the last line known before the branch" in text, text


def _uneven_shift():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32):
            s = T.alloc_shared((64,), "float32")
            for i in T.Parallel(64):
                s[i] = A[i]
            T.sync_threads()  # the last line known before the exchange
            for i in T.Parallel(40):  # two iterations on threads 0..7, one on the others: `if it * 32 + tx < 40`
                v = s[i + 1]
                s[i] = v * 2.0
            T.sync_threads()
            for i in T.Parallel(64):
                B[i] = s[i]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_the_inner_guard_of_an_uneven_parallel_loop_names_the_loop(arch):
    """A T.Parallel(40) on 32 threads becomes `for it in range(2): if it * 32 + tx < 40: ...`: the guard is built
    inside the loop's lowering, not returned in its place, and had no line (the error pointed at the
    T.sync_threads before it, "the last one known at this stage")."""
    with pytest.raises(CompileError) as err:
        tilelang.compile(_uneven_shift(), target=f"musa -arch={arch}")
    text = str(err.value)
    line = _uneven_shift.__code__.co_firstlineno + 8
    assert "`if it * 32 + thread_x < 40:` writes and reads shared.dyn buffer `s`" in text, text
    assert err.value.loc is not None and (err.value.loc.filename, err.value.loc.lineno) == (__file__, line), text
    assert "for i in T.Parallel(40):" in text, text
    assert "the last one known at this stage" not in text, text
