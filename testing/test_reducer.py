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
