"""Asynchronous barriers (mp_31): T.alloc_barrier and the arrive / wait / expect-transaction ops in upstream's
spellings, and named barriers (T.sync_threads(id, count) over part of the block), lowered by LowerAsyncBarriers to
MUSA's integer barrier ids and run in the simulator; misuse is a compile error at the user's line, and a wrong
parity or too few arrivals is the simulator's named deadlock."""

import functools

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.launcher import KernelLaunchError

STAGES, ROW = 2, 32
NO_SYNC = {tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True}  # the barriers alone order the stages


def producer_consumer(steps: int, empty_count: int = 96):
    """Warp 0 produces rows of A into a 2-stage ring with plain stores and arrives on `full`; warps 1..3 wait for
    `full` with parity (k // 2) % 2 (^ `flip`, a planted bug when 1), consume (B = 2 * row, by warp 1) and arrive on
    `empty`, which the producer waits for (parity flipped: the first wait on a fresh barrier returns at once)."""

    @T.prim_func
    def ring(A: T.Tensor((steps, ROW), "float32"), B: T.Tensor((steps, ROW), "float32"), flip: T.int32):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            S = T.alloc_shared((STAGES, ROW), "float32")
            full = T.alloc_barrier([32] * STAGES)
            empty = T.alloc_barrier([empty_count] * STAGES)
            for k in T.serial(steps):
                if tx < 32:
                    T.barrier_wait(empty[k % STAGES], ((k // STAGES) % 2) ^ 1)
                    S[k % STAGES, tx] = A[k, tx]
                    T.barrier_arrive(full[k % STAGES])
                else:
                    T.mbarrier_wait_parity(mbarrier=full[k % STAGES], parity=((k // STAGES) % 2) ^ flip)
                    if tx < 64:
                        B[k, tx - 32] = S[k % STAGES, tx - 32] * 2.0
                    T.mbarrier_arrive(mbarrier=empty[k % STAGES])

    return ring


@functools.lru_cache(maxsize=None)
def compiled(kind: str):
    if kind == "ring":
        return tilelang.compile(producer_consumer(6), target="musa -arch=mp_31", pass_configs=NO_SYNC)
    if kind == "too_few_arrivals":  # empty expects 128 threads (4 warps); only 3 warps arrive
        return tilelang.compile(producer_consumer(4, empty_count=128), target="musa -arch=mp_31",
                                pass_configs=NO_SYNC)
    raise KeyError(kind)


def test_producer_consumer_ring_through_barriers():
    kernel = compiled("ring")
    source = kernel.get_kernel_source()
    # 4 barriers: full = ids 1, 2 (one warp each), empty = ids 3, 4 (three warps each); one thread initialises them
    for text in ("tl::barrier_record(4);", "if (((int)threadIdx.x) == 0) {", "tl::barrier_init(1, 1);",
                 "tl::barrier_init(2, 1);", "tl::barrier_init(3, 3);", "tl::barrier_init(4, 3);",
                 "tl::barrier_wait(((k & 1) + 3), ", "tl::barrier_arrive(((k & 1) + 1));",
                 "tl::barrier_arrive(((k & 1) + 3));"):
        assert text.replace("((k & 1) + 3)", "(k & 1) + 3").replace("((k & 1) + 1)", "(k & 1) + 1") in source, text
    assert source.index("tl::barrier_record(4);") < source.index("__syncthreads();") < source.index("for (int k")
    a, b = rand((6, ROW), torch.float32, 3), poison((6, ROW), torch.float32)
    kernel(a, b, 0)
    torch.testing.assert_close(b, a * 2)


def test_a_wrong_parity_and_too_few_arrivals_are_named_errors(monkeypatch):
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    a = rand((6, ROW), torch.float32, 4)
    # The consumers' first wait (parity 1 of a fresh barrier) returns at once: they read the stage before the
    # producer's store reached them.
    with pytest.raises(KernelLaunchError, match=r"data race on byte \d+ of shared `S`"):
        compiled("ring")(a, poison((6, ROW), torch.float32), 1)
    with pytest.raises(KernelLaunchError, match=r"deadlock.*async barrier [34] in phase \d+ .*1 of 4 warp arrivals "
                                                r"pending"):
        compiled("too_few_arrivals")(a[:4], poison((4, ROW), torch.float32), 0)


def test_named_barrier_over_half_the_block():
    """Threads 0..63 exchange values through shared memory behind T.sync_threads(1, 64); threads 64..127 never
    reach it (a block barrier there would deadlock)."""
    N = 128

    @T.prim_func
    def half(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            S = T.alloc_shared((64,), "float32")
            if tx < 64:
                S[tx] = A[tx] + 1.0
                T.sync_threads(1, 64)
                B[tx] = S[63 - tx]
            else:
                B[tx] = A[tx]

    kernel = tilelang.compile(half, target="musa -arch=mp_31", pass_configs=NO_SYNC)
    source = kernel.get_kernel_source()
    assert "tl::barrier_record(1);" in source and "tl::barrier_init(1, 2);" in source
    assert "tl::barrier_sync(1);" in source
    a, b = rand((N,), torch.float32, 5), poison((N,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b[:64], a[:64].flip(0) + 1)
    torch.testing.assert_close(b[64:], a[64:])


def _lower(func, arch="mp_31"):
    """Device source without building (for constructs the tests above do not run)."""
    from tilelang_musa.codegen.source import generate
    from tilelang_musa.jit.compile import _settle
    from tilelang_musa.transform.pipeline import lower
    from tilelang_musa.transform.split_kernels import split_kernels

    req = _settle(func, None, f"musa -arch={arch}", "sim", None, None, False, None)
    return generate([lower(k, req.target, req.pass_options) for k in split_kernels(req.program)], req.target,
                    req.name).device


def test_every_spelling_prints_its_builtin_and_ids_follow_the_allocations():
    @T.prim_func
    def spellings(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=128):
            one = T.alloc_barrier(128)
            many = T.alloc_barrier([1, 64, 32])
            T.mbarrier_expect_tx(many[1], 256)
            T.mbarrier_arrive_expect_tx(many[2], 64)
            T.ptx_arrive_barrier_expect_tx(many[2], 64)
            T.evaluate(T.ptx_arrive_barrier(one))
            T.barrier_arrive(many[0])
            T.barrier_wait(one, 0)
            T.mbarrier_wait_parity(many[1], 1)
            T.call_extern("void", "__musa_memcpy_g2s_commit_group")
            T.lma_wait()

    source = _lower(spellings)
    for text in ("tl::barrier_record(4);", "tl::barrier_init(1, 4);", "tl::barrier_init(2, 1);",
                 "tl::barrier_init(3, 2);", "tl::barrier_init(4, 1);", "tl::barrier_expect_tx(3, 256);",
                 "tl::barrier_arrive_expect_tx(4, 64);", "tl::barrier_arrive(1);", "tl::barrier_arrive(2);",
                 "tl::barrier_wait(1, 0);", "tl::barrier_wait(3, 1);", "__musa_memcpy_g2s_commit_group();",
                 "tl::lma_wait();"):
        assert text in source, text
    assert source.count("tl::barrier_arrive_expect_tx(4, 64);") == 2


def test_barrier_misuse_is_an_error_at_the_line():
    @T.prim_func
    def on_mp22(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=128):
            b = T.alloc_barrier(128)
            T.barrier_arrive(b)

    with pytest.raises(tilelang.CompileError, match=r"test_async_barrier.py:\d+.*\n.*b = T.alloc_barrier\(128\)"
                                                    r"(.|\n)*T.alloc_barrier: mp_22 has no asynchronous barriers"):
        _lower(on_mp22, "mp_22")

    @T.prim_func
    def too_many(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=128):
            first = T.alloc_barrier([32] * 60)
            second = T.alloc_barrier([32] * 4)
            T.barrier_arrive(first[0])
            T.barrier_arrive(second[0])

    with pytest.raises(tilelang.CompileError, match=r"second = T.alloc_barrier(.|\n)*`second` needs barrier ids up "
                                                    r"to 64, but a kernel has at most 63"):
        _lower(too_many)

    @T.prim_func
    def in_loop(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=128):
            for k in T.serial(2):
                b = T.alloc_barrier(128)
                T.barrier_arrive(b)

    with pytest.raises(tilelang.CompileError, match=r"b = T.alloc_barrier(.|\n)*allocated inside a loop or branch"):
        _lower(in_loop)

    with pytest.raises(tilelang.CompileError, match=r"T.barrier_wait: the barrier must be a T.alloc_barrier buffer"):
        @T.prim_func
        def not_a_barrier(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=128):
                S = T.alloc_shared((1,), "uint64")
                T.barrier_wait(S[0], 0)

    @T.prim_func
    def odd_named(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            if tx < 48:
                T.sync_threads(2, 48)

    with pytest.raises(tilelang.CompileError, match=r"T.sync_threads\(2, 48\): a named barrier counts whole warps"):
        _lower(odd_named)
