"""A reducer epoch's rules (upstream main's reducer v2): one T.reducer_init, T.reducer_update only inside a
T.Parallel loop between it and the finalize, one T.finalize_reducer(acc, dst) in the init's scope or a conditional
nested in it, no other access. Each broken rule is an error at the line that breaks it; the legacy spelling stays
accepted on a reducer no epoch operation touches."""

import pytest
import torch

import tilelang
import tilelang.language as T

from conftest import poison, rand

ARCHES = ["mp_22", "mp_31"]


def _kernel(body):
    """A 1-block kernel of 128 threads summing A (8 elements) into B[0] by `body(A, B, src)`."""

    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128):
            src = T.alloc_fragment((8,), "float32")
            T.copy(A, src)
            body(A, B, src)

    return main


@T.macro
def _update_before_init(A, B, src):
    acc = T.alloc_reducer((1,), "float32", op="sum")
    for i in T.Parallel(8):
        T.reducer_update(acc[0], src[i])


@T.macro
def _double_init(A, B, src):
    acc = T.alloc_reducer((1,), "float32", op="sum")
    T.reducer_init(acc)
    T.reducer_init(acc)


@T.macro
def _update_outside_parallel(A, B, src):
    acc = T.alloc_reducer((1,), "float32", op="sum")
    T.reducer_init(acc)
    T.reducer_update(acc[0], src[0])


@T.macro
def _ordinary_store(A, B, src):
    acc = T.alloc_reducer((1,), "float32", op="sum")
    T.reducer_init(acc)
    for i in T.Parallel(8):
        acc[0] += src[i]


@T.macro
def _read_before_finalize(A, B, src):
    acc = T.alloc_reducer((1,), "float32", op="sum")
    T.reducer_init(acc)
    for i in T.Parallel(8):
        T.reducer_update(acc[0], src[i])
    B[0] = acc[0]


@T.macro
def _clear_then_update(A, B, src):
    acc = T.alloc_reducer((1,), "float32", op="sum")
    T.clear(acc)
    for i in T.Parallel(8):
        T.reducer_update(acc[0], src[i])


@T.macro
def _in_place_finalize_of_an_epoch(A, B, src):
    acc = T.alloc_reducer((1,), "float32", op="sum")
    T.reducer_init(acc)
    T.finalize_reducer(acc)


@T.macro
def _finalize_outside_the_init_loop(A, B, src):
    acc = T.alloc_reducer((1,), "float32", op="sum")
    result = T.alloc_fragment((1,), "float32")
    for _ in T.serial(4):
        T.reducer_init(acc)
    T.finalize_reducer(acc, result)


@T.macro
def _finalize_in_an_extra_loop(A, B, src):
    acc = T.alloc_reducer((1,), "float32", op="sum")
    result = T.alloc_fragment((1,), "float32")
    T.reducer_init(acc)
    for _ in T.serial(4):
        T.finalize_reducer(acc, result)


@T.macro
def _seed_of_another_dtype(A, B, src):
    acc = T.alloc_reducer((1,), "float32", op="sum")
    T.reducer_init(acc, T.float16(1.0))


@T.macro
def _never_finalized(A, B, src):
    acc = T.alloc_reducer((1,), "float32", op="sum")
    T.reducer_init(acc)


REJECTED = [
    (_update_before_init, "T.reducer_update(acc[0], src[i])", r"T.reducer_update on reducer `acc` before T.reducer_init"),
    (_double_init, "T.reducer_init(acc)", r"double T.reducer_init on reducer `acc` \(first at line \d+\)"),
    (_update_outside_parallel, "T.reducer_update(acc[0], src[0])", r"outside any T.Parallel loop"),
    (_ordinary_store, "acc[0] += src[i]", r"illegal store to reducer `acc` \(an ordinary store\)"),
    (_read_before_finalize, "B[0] = acc[0]", r"illegal read of reducer `acc`"),
    (_clear_then_update, "T.reducer_update(acc[0], src[i])", r"illegal mix on reducer `acc`: T.reducer_update .*"
                                                              r"T.fill / T.clear at line \d+"),
    (_in_place_finalize_of_an_epoch, "T.finalize_reducer(acc)", r"illegal use of reducer `acc` \(an in-place"),
    (_finalize_outside_the_init_loop, "T.finalize_reducer(acc, result)",
     r"not in the scope of its T.reducer_init \(at line \d+\)"),
    (_finalize_in_an_extra_loop, "T.finalize_reducer(acc, result)", r"not in the scope of its T.reducer_init"),
    (_seed_of_another_dtype, "T.reducer_init(acc, T.float16(1.0))", r"has dtype float16, which does not match "
                                                                     r"reducer `acc`'s dtype float32"),
    (_never_finalized, "T.reducer_init(acc)", r"reducer `acc` is initialized but never finalized"),
]


@pytest.mark.parametrize("body, line, message", REJECTED, ids=[r[0].__name__.strip("_") for r in REJECTED])
def test_broken_epoch_rule_is_an_error_at_its_line(body, line, message):
    with pytest.raises(tilelang.CompileError, match=message) as caught:
        tilelang.compile(_kernel(body), target="musa -arch=mp_31")
    assert "test_reducer_epoch.py" in str(caught.value) and line in str(caught.value), str(caught.value)


def test_bitwise_reducer_of_a_float_dtype_is_an_assertion_error():
    """Upstream asserts it (`pytest.raises(AssertionError, match="integer dtype")`); still a CompileError here."""
    with pytest.raises(AssertionError, match="needs an integer dtype; got float32"):
        @T.prim_func
        def main(B: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=32):
                T.alloc_reducer((1,), "float32", op="bitand")


@pytest.mark.parametrize("arch", ARCHES)
def test_legacy_spelling_still_sums(arch):
    """T.clear, `acc[j] += v`, an in-place T.finalize_reducer(acc), then reading acc: upstream's deprecated v1."""
    M, N = 32, 16

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Out: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128):
            acc = T.alloc_reducer((N,), "float32", op="sum", replication="all")
            T.clear(acc)
            for i, j in T.Parallel(M, N):
                acc[j] += X[i, j]
            T.finalize_reducer(acc)
            T.copy(acc, Out)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    x, out = rand((M, N), torch.float32, 11), poison((N,), torch.float32)
    kernel(x, out)
    torch.testing.assert_close(out, x.sum(0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ARCHES)
def test_epoch_reopens_per_serial_iteration_and_closes_in_a_nested_conditional(arch):
    """Init and finalize in a serial loop's body (one epoch per iteration), the finalize under a block-uniform `if`
    nested in that scope: blocks whose flag is negative skip it and leave the partials unread."""
    K, BLOCK = 256, 64

    @T.prim_func
    def main(X: T.Tensor((2, K), "float32"), S: T.Tensor((2,), "int32"), Out: T.Tensor((2,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            tile = T.alloc_fragment((BLOCK,), "float32")
            best = T.alloc_fragment((1,), "float32")
            best[0] = -T.infinity("float32")
            for k in T.serial(K // BLOCK):
                T.copy(X[bx, k * BLOCK], tile)
                acc = T.alloc_reducer((1,), "float32", op="max")
                T.reducer_init(acc, best[0])
                for i in T.Parallel(BLOCK):
                    T.reducer_update(acc[0], tile[i])
                if S[bx] >= 0:
                    T.finalize_reducer(acc, best)
            if T.get_thread_binding() == 0:
                Out[bx] = best[0]

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    x, out = rand((2, K), torch.float32, 12), poison((2,), torch.float32)
    flags = torch.tensor([-1, 1], dtype=torch.int32)
    kernel(x, flags, out)
    assert out[0].item() == float("-inf")
    torch.testing.assert_close(out[1], x[1].max())
