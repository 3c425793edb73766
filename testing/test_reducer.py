"""Reducers (T.alloc_reducer / T.reducer_init / T.reducer_update / T.finalize_reducer): a seed given to
T.reducer_init is combined once per logical output, however many threads hold partials."""

import pytest
import torch

import tilelang
import tilelang.language as T

from conftest import poison, rand

ARCHES = ["mp_22", "mp_31"]


def seeded_sum(extent: int, threads: int, seed, op: str = "sum", dtype: str = "float32"):
    @T.prim_func
    def main(A: T.Tensor((extent,), dtype), B: T.Tensor((1,), dtype)):
        with T.Kernel(1, threads=threads):
            src = T.alloc_fragment((extent,), dtype)
            T.copy(A, src)
            acc = T.alloc_reducer((1,), dtype, op=op)
            T.reducer_init(acc, seed)
            for i in T.Parallel(extent):
                T.reducer_update(acc[0], src[i])
            result = T.alloc_fragment((1,), dtype)
            T.finalize_reducer(acc, result)
            if T.get_thread_binding() == 0:
                B[0] = result[0]

    return main


@pytest.mark.parametrize("arch", ARCHES)
def test_sum_seed_is_combined_once_not_once_per_thread(arch):
    """Upstream's regression: 128 threads summing 1..8 with seed 100 give 136 (not 100 * 128 + 36)."""
    kernel = tilelang.compile(seeded_sum(8, 128, 100.0), target=f"musa -arch={arch}")
    assert "tl::AllReduce<tl::SumOp, 128, 1," in kernel.get_kernel_source()
    a = torch.arange(1, 9, dtype=torch.float32)
    b = poison((1,), torch.float32)
    kernel(a, b)
    assert b.item() == 136.0


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("op,dtype,seed", [("sum", "float32", -2.5), ("max", "float32", 0.75),
                                           ("min", "float32", -0.25), ("bitxor", "int32", 0x5A),
                                           ("bitor", "int32", 0x100), ("sum", "int32", 7)])
def test_seed_matches_torch_per_op(arch, op, dtype, seed):
    extent = 24
    kernel = tilelang.compile(seeded_sum(extent, 64, seed, op, dtype), target=f"musa -arch={arch}")
    if dtype == "int32":
        a = torch.randint(-1000, 1000, (extent,), generator=torch.Generator().manual_seed(3), dtype=torch.int32)
        b = torch.full((1,), -1, dtype=torch.int32)
    else:
        a, b = rand((extent,), torch.float32, 4), poison((1,), torch.float32)
    kernel(a, b)
    if op == "sum":
        ref = a.sum() + seed
    elif op == "max":
        ref = torch.clamp(a.max(), min=seed)
    elif op == "min":
        ref = torch.clamp(a.min(), max=seed)
    else:
        ref = torch.tensor(seed, dtype=torch.int32)
        for x in a:
            ref = ref ^ x if op == "bitxor" else ref | x
    torch.testing.assert_close(b[0], ref.to(b.dtype), rtol=1e-5, atol=1e-5)


def test_nonzero_fill_of_a_sum_reducer_is_rejected_with_its_line():
    """T.fill(r, 5) on a sum reducer would put 5 into every thread's partial: rejected, pointing at T.reducer_init."""
    with pytest.raises(tilelang.CompileError, match=r"test_reducer.py:\d+.*\n(.*\n)*.*T.fill: `acc` is a sum reducer.*"
                                                    r"T.reducer_init\(acc, 5"):
        @T.prim_func
        def main(B: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((4,), "float32", op="sum")
                T.fill(acc, 5)
                T.finalize_reducer(acc)
                T.copy(acc, B)


@pytest.mark.parametrize("arch", ARCHES)
def test_seed_read_from_memory_is_taken_at_reducer_init(arch):
    """`T.reducer_init(acc, init=S[0])`: the start value is S[0] as it is at the init, although S[0] is
    overwritten before T.finalize_reducer (upstream: later writes cannot change the epoch's starting value)."""
    M, N = 16, 8

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), S: T.Tensor((N,), "float32"), Out: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128):
            start = T.alloc_shared((N,), "float32")
            T.copy(S, start)
            acc = T.alloc_reducer((N,), "float32", op="sum")
            for j in T.serial(N):  # one epoch per column, each with its own start value
                T.reducer_init(acc, init=start[j])
                for i, k in T.Parallel(M, N):
                    T.reducer_update(acc[k], T.if_then_else(k == j, X[i, k], 0.0))
                T.fill(start, -1000.0)  # must not reach the epoch's start
                total = T.alloc_fragment((N,), "float32")
                T.finalize_reducer(acc, total)
                Out[j] = total[j]
                T.copy(S, start)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    x, s, out = rand((M, N), torch.float32, 7), rand((N,), torch.float32, 8), poison((N,), torch.float32)
    kernel(x, s, out)
    torch.testing.assert_close(out, x.sum(0) + s, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("spelling", ["keyword", "annotations"])
def test_finalize_batch_shares_one_exchange_per_batch(arch, spelling):
    """T.finalize_reducer(acc, batch=4) (or annotations={"batch": 4}): 8 elements in two tl::BatchAllReduce calls."""
    M, N = 32, 8

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Out: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128):
            acc = T.alloc_reducer((N,), "float32", op="max")
            T.reducer_init(acc, 0.5)
            for i, j in T.Parallel(M, N):
                T.reducer_update(acc[j], X[i, j])
            result = T.alloc_fragment((N,), "float32")
            if spelling == "keyword":
                T.finalize_reducer(acc, result, batch=4)
            else:
                T.finalize_reducer(acc, result, annotations={"batch": 4})
            T.copy(result, Out)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    warp = 128 if arch == "mp_22" else 32
    assert f"tl::BatchAllReduce<tl::MaxOp, 128, 1, 4, {warp}>::run_batch" in kernel.get_kernel_source()
    x, out = rand((M, N), torch.float32, 9), poison((N,), torch.float32)
    kernel(x, out)
    torch.testing.assert_close(out, torch.clamp(x.amax(0), min=0.5))


def test_reducer_keywords_without_an_effect_are_rejected():
    with pytest.raises(tilelang.CompileError, match=r"T.finalize_reducer: annotation 'coalesce' has no effect"):
        @T.prim_func
        def main(Out: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((4,), "float32", op="sum")
                T.reducer_init(acc)
                result = T.alloc_fragment((4,), "float32")
                T.finalize_reducer(acc, result, annotations={"coalesce": 1})
                T.copy(result, Out)
    with pytest.raises(tilelang.CompileError, match=r"T.finalize_reducer: batch=3 must evenly divide total output "
                                                     r"elements \(4\) of `acc`"):
        tilelang.compile(_finalize_with_batch(3), target="musa -arch=mp_31")


@pytest.mark.parametrize("batch, message", [
    (0, r"T.finalize_reducer: batch must be >= 1 \(an integer\), got 0"),
    (-1, r"T.finalize_reducer: batch must be >= 1 \(an integer\), got -1"),
    (8, r"T.finalize_reducer: batch=8 exceeds total output elements \(4\) of `acc`"),
])
def test_finalize_reducer_bad_batch_is_named_in_upstreams_words(batch, message):
    """Upstream's messages ("batch must be >= 1", "exceeds total output elements", "must evenly divide total output
    elements"), which Moore Threads' test_tilelang_language_reduce.py matches; the bound is checked when the kernel
    is defined, the others when it is compiled."""
    with pytest.raises(ValueError, match=message):
        tilelang.compile(_finalize_with_batch(batch), target="musa -arch=mp_31")


def _finalize_with_batch(batch):
    @T.prim_func
    def main(Out: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32):
            acc = T.alloc_reducer((4,), "float32", op="sum")
            T.clear(acc)  # the legacy spelling: an in-place finalize
            T.finalize_reducer(acc, batch=batch)
            T.copy(acc, Out)

    return main
