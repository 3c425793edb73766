"""A reduction whose rows meet through shared memory (a row spread over more than 32 threads) exchanges all of a
thread's rows at once when the user asked for no batching (tileop/reduce.py `exchange_batch`): one pair of
barriers for the reduction instead of a pair (and a guard) per row, as FlashAttention's row max and sum on mp_22,
whose 128-thread rows of 64 threads spent 3,201 barriers a block. Each row's combine is unchanged, so the results
are bit-identical to one exchange per row; both are checked against torch in the simulator on both arches."""

import importlib.util
import pathlib

import pytest
import torch

import tilelang
import tilelang.language as T
import tilelang_musa.tileop.reduce as reduce_op
from conftest import poison, rand
from tilelang_musa.jit.cache import clear_memory_cache

EXAMPLE = pathlib.Path(__file__).parents[1] / "examples" / "flash_attention" / "flash_attention.py"
_spec = importlib.util.spec_from_file_location("flash_attention_example_batching", EXAMPLE)
flash_example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(flash_example)
AUTO_BATCH_SHARED_BYTES = reduce_op.AUTO_BATCH_SHARED_BYTES  # the lowering's own setting


def column_sums(M, N, threads):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), O: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=threads):
            F = T.alloc_fragment((M, N), "float32")
            R = T.alloc_fragment((N,), "float32")
            T.copy(A, F)
            T.reduce_sum(F, R, dim=0)
            T.copy(R, O)

    return main


def compiled(program, arch, batched, monkeypatch, **options):
    """`program` compiled with the lowering's own batching on or off (off: one exchange per row, as before)."""
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")  # the two lowerings of one program must not share an entry
    monkeypatch.setattr(reduce_op, "AUTO_BATCH_SHARED_BYTES", AUTO_BATCH_SHARED_BYTES if batched else 0)
    clear_memory_cache()
    return tilelang.compile(program, target=f"musa -arch={arch}", **options)


def barriers_per_block(kernel, inputs):
    counters = kernel.get_profiler().counters(inputs)
    return counters.block_barriers / counters.blocks


def test_exchange_batch_is_the_most_results_that_divide_and_fit():
    assert reduce_op.exchange_batch(128, 256, 4) == 8  # 8 KiB / (256 threads x 4 B)
    assert reduce_op.exchange_batch(8, 128, 4) == 8  # all of them
    assert reduce_op.exchange_batch(12, 256, 4) == 6  # a divisor of 12 within 8
    assert reduce_op.exchange_batch(7, 1024, 8) == 1  # nothing more fits


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_column_sums_over_64_threads_share_one_exchange_bit_for_bit(arch, monkeypatch):
    # 64 x 512 over 256 threads: a column spans 2 threads 128 apart (through shared memory on both warp sizes),
    # each thread holds 4 columns' partials: one exchange of 4 instead of 4 of 1.
    program = column_sums(64, 512, 256)
    one_by_one = compiled(program, arch, False, monkeypatch)
    batched = compiled(program, arch, True, monkeypatch)
    source = batched.get_kernel_source()
    assert "tl::BatchAllReduce<tl::SumOp, 2, 128, 4, " in source, source
    assert "tl::AllReduce<" not in source
    a = rand((64, 512), torch.float32, 40)
    outs = []
    for kernel in (one_by_one, batched):
        o = poison((512,), torch.float32)
        kernel(a, o)
        outs.append(o)
    assert torch.equal(outs[0], outs[1])
    torch.testing.assert_close(outs[1], a.sum(0), rtol=1e-4, atol=1e-3)
    before = barriers_per_block(one_by_one, [a, poison((512,), torch.float32)])
    after = barriers_per_block(batched, [a, poison((512,), torch.float32)])
    assert after * 4 <= before, (before, after)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_an_explicit_batch_is_kept(arch, monkeypatch):
    @T.prim_func
    def main(A: T.Tensor((64, 512), "float32"), O: T.Tensor((512,), "float32")):
        with T.Kernel(1, threads=256):
            F = T.alloc_fragment((64, 512), "float32")
            R = T.alloc_fragment((512,), "float32")
            T.copy(A, F)
            T.reduce_sum(F, R, dim=0, batch=2)
            T.copy(R, O)

    source = compiled(main, arch, True, monkeypatch).get_kernel_source()
    assert "tl::BatchAllReduce<tl::SumOp, 2, 128, 2, " in source


def test_flash_attention_on_mp_22_takes_over_4x_fewer_barriers_with_identical_output(monkeypatch):
    # The example's mp_22 configuration (bench_perf_model.py): 64 x 32 blocks, 128 threads; each row of the
    # score tile spans 64 threads, so its max and sum met through shared memory a row at a time.
    program = flash_example.flash_attention.func(1, 1, 256, 128, False, layout="bhsd", block_M=64, block_N=32,
                                                 num_stages=1, threads=128)
    kernels = [compiled(program, "mp_22", batched, monkeypatch) for batched in (False, True)]
    shape = (1, 1, 256, 128)
    q, k, v = (rand(shape, torch.float16, seed) for seed in (50, 51, 52))
    outs, barriers = [], []
    for kernel in kernels:
        out = poison(shape, torch.float16)
        kernel(q, k, v, out)
        outs.append(out)
        barriers.append(barriers_per_block(kernel, [q, k, v, poison(shape, torch.float16)]))
    assert torch.equal(outs[0], outs[1])
    expected = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
    torch.testing.assert_close(outs[1].float(), expected, rtol=1e-2, atol=1e-2)
    assert barriers[1] * 4 <= barriers[0], barriers
