"""The simulator's cycle model (issue 12; src/tl_templates/sim/sim/profile.h): the counters' simulated cycles on
kernels whose critical path is known by hand, and the overlap a pipeline buys.

The figures come from tilelang_musa/profiler/arch_figures.py: an instruction (a memory access, or an arithmetic
instruction as the code generator counts them) is 1 cycle, a global load's data arrives `global_latency_cycles`
after it, a block barrier costs `barrier_cycles` after its last thread arrives, a matrix instruction FLOPs / the
arch's rate."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from test_sim_counters import gather, one_tile_gemm, transpose
from tilelang_musa.profiler.arch_figures import figures_for

ARCHS = ["mp_22", "mp_31"]


def compile_for(program, arch):
    return tilelang.compile(program, target=f"musa -arch={arch}")


@pytest.mark.parametrize("arch", ARCHS)
def test_a_load_then_a_store_takes_the_load_latency(arch):
    """Each thread: load (cycle 1, data at 1 + latency), store (cycle 2); the block ends when its last load has
    arrived. Nothing waits at a barrier or on an async copy."""
    latency = figures_for(arch).global_latency_cycles
    kernel = compile_for(gather(1), arch)
    counters = kernel.get_profiler().counters([rand((128,), torch.float32, 1), poison((128,), torch.float32)])
    assert counters.block_cycles == counters.block_cycles_max == 1 + latency
    assert counters.barrier_stall_cycles == counters.tensor_cycles == 0
    assert counters.async_barrier_stall_cycles == counters.copy_wait_stall_cycles == counters.mma_wait_stall_cycles == 0


@pytest.mark.parametrize("arch", ARCHS)
def test_a_barrier_waits_for_the_loads_before_it_then_costs_its_own_cycles(arch):
    """The transpose, one 32-thread group: 32 x (global load, shared store) = 64 cycles, the last load's data at
    63 + latency; the barrier releases `barrier_cycles` later (each warp's stall at the barrier, after its own
    loads); then 32 x (shared load, global store)."""
    f = figures_for(arch)
    kernel = compile_for(transpose(False), arch)
    a, b = rand((32, 32), torch.float32, 2), poison((32, 32), torch.float32)
    counters = kernel.get_profiler().counters([a, b])
    torch.testing.assert_close(b, a.T)
    assert counters.block_cycles == 63 + f.global_latency_cycles + f.barrier_cycles + 64
    assert counters.barrier_stall_cycles == f.barrier_cycles  # one warp on either arch (32 threads)


def test_the_warp_that_arrives_first_at_a_barrier_stalls_for_the_other():
    """Two warps on mp_31: warp 0 makes 10 stores, warp 1 none, then a block barrier: warp 1 waits 10 cycles more
    than warp 0; each waits the barrier's own cycles."""
    f = figures_for("mp_31")

    @T.prim_func
    def main(B: T.Tensor((320,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            if tx < 32:
                for i in T.serial(10):
                    B[i * 32 + tx] = 1.0
            T.sync_threads()

    kernel = compile_for(main, "mp_31")
    counters = kernel.get_profiler().counters([poison((320,), torch.float32)])
    assert kernel.get_kernel_source().count("__syncthreads();") == 1
    assert counters.block_cycles == 10 + f.barrier_cycles
    assert counters.barrier_stall_cycles == (10 + f.barrier_cycles) + f.barrier_cycles


def arithmetic_loop():
    @T.prim_func
    def main(B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            acc = T.alloc_local((1,), "float32")
            acc[0] = 1.0
            for i in T.serial(100):
                acc[0] = acc[0] * 0.5 + 1.0
            B[tx] = acc[0]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_arithmetic_costs_a_cycle_per_instruction_as_the_code_generator_counts_it(arch):
    """100 x (multiply, add) per thread, then a store: 201 cycles, 200 arithmetic instructions per warp (1 warp on
    mp_22, 4 on mp_31). The simulator's build charges them on the statement's line; the device source is untouched."""
    kernel = compile_for(arithmetic_loop(), arch)
    b = poison((128,), torch.float32)
    counters = kernel.get_profiler().counters([b])
    torch.testing.assert_close(b, torch.full((128,), 2.0))  # x -> x / 2 + 1 converges to 2 from 1
    assert counters.block_cycles == 201
    assert counters.arithmetic_instructions == 200 * 128 // (128 if arch == "mp_22" else 32)
    assert "tl_sim::Compute" not in kernel.get_kernel_source()


@pytest.mark.parametrize("arch", ARCHS)
def test_matrix_instructions_busy_the_tensor_pipe_for_their_flops_at_the_arch_rate(arch):
    """64 x 64 x 32 in fp16: SQMMA at the 16-bit rate on mp_31, warp MMA at its rate on mp_22."""
    f = figures_for(arch)
    rate = f.tensor_flops_per_cycle.get(16, f.warp_mma_flops_per_cycle) if arch == "mp_31" \
        else f.warp_mma_flops_per_cycle
    kernel = compile_for(one_tile_gemm(), arch)
    counters = kernel.get_profiler().counters(
        [rand((64, 32), torch.float16, 3), rand((32, 64), torch.float16, 4), poison((64, 64), torch.float32)])
    assert counters.tensor_cycles == 2 * 64 * 64 * 32 / rate
    assert counters.block_cycles > counters.tensor_cycles  # loads and stores around it


def pipelined_gemm(stages, M=128, N=128, K=512, block=64, block_K=32):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            A_s = T.alloc_shared((block, block_K), "float16")
            B_s = T.alloc_shared((block_K, block), "float16")
            C_l = T.alloc_fragment((block, block), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.copy(A[by * block, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block, bx * block])

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_pipeline_overlaps_its_loads_with_the_matrix_work(arch):
    """The same GEMM unpipelined and with 3 stages: the same matrix work, a shorter critical path once the loads of
    later steps fly while the tensor pipe works; the pipelined kernel's waits are on its async copies (LDLMS on
    mp_22, TME on mp_31's barriers)."""
    a, b = rand((128, 512), torch.float16, 5), rand((512, 128), torch.float16, 6)
    runs = {}
    for stages in (0, 3):
        c = poison((128, 128), torch.float32)
        runs[stages] = compile_for(pipelined_gemm(stages), arch).get_profiler().counters([a, b, c])
        torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)
    plain, piped = runs[0], runs[3]
    assert plain.tensor_cycles == piped.tensor_cycles == 4 * 2 * 64 * 64 * 512 / (
        figures_for(arch).tensor_flops_per_cycle.get(16) or figures_for(arch).warp_mma_flops_per_cycle)
    assert piped.block_cycles < 0.75 * plain.block_cycles
    assert plain.async_barrier_stall_cycles == plain.copy_wait_stall_cycles == 0
    waits = piped.async_barrier_stall_cycles if arch == "mp_31" else piped.copy_wait_stall_cycles
    assert waits > 0


def test_a_sample_keeps_the_longest_block_unscaled():
    kernel = compile_for(pipelined_gemm(2, M=256, N=256), "mp_31")
    a, b = rand((256, 512), torch.float16, 7), rand((512, 256), torch.float16, 8)
    counters = kernel.get_profiler().counters([a, b, poison((256, 256), torch.float32)], sample_blocks=4)
    scaled = counters.scaled()
    assert (counters.blocks, scaled.blocks) == (4, 16)
    assert scaled.block_cycles == 4 * counters.block_cycles
    assert scaled.block_cycles_max == counters.block_cycles_max <= counters.block_cycles


def two_async_copies(threads):
    """Each thread copies its 4-byte piece of `a`, then of `b`, through LDLMS, each copy waited for at once
    (T.copy(..., force_async_copy=True) completes before the next statement), then stores the sum."""

    @T.prim_func
    def main(A: T.Tensor((threads,), "float32"), B: T.Tensor((threads,), "float32"),
             C: T.Tensor((threads,), "float32")):
        with T.Kernel(1, threads=threads):
            a = T.alloc_shared((threads,), "float32")
            b = T.alloc_shared((threads,), "float32")
            T.copy(A, a, force_async_copy=True)
            T.copy(B, b, force_async_copy=True)
            for i in T.Parallel(threads):
                C[i] = a[i] + b[i]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_async_copies_of_threads_simulated_one_after_another_overlap(arch):
    """The simulator runs the block's threads one after another: thread 0 issues its first copy, waits for it, issues
    its second; thread 1 then issues its first at its own clock, earlier than thread 0's second. The transfer stream
    gives it the idle time before that one, so every thread's copies overlap and the block takes about two copy
    latencies. Before (one "next free" cycle per block), each thread's copies queued behind the previous thread's
    second copy: 128 threads x one latency, the chain issue 40 found in GDN prefill (27x slow)."""
    f = figures_for(arch)
    threads = 128
    kernel = compile_for(two_async_copies(threads), arch)
    a, b, c = rand((threads,), torch.float32, 5), rand((threads,), torch.float32, 6), poison((threads,), torch.float32)
    counters = kernel.get_profiler().counters([a, b, c])
    torch.testing.assert_close(c, a + b)
    assert counters.ldlms_bytes == 2 * threads * 4
    stream = 2 * threads * 4 / f.transfer_bytes_per_cycle  # every piece's bytes, back to back
    assert 2 * f.async_latency_cycles < counters.block_cycles < 3 * f.async_latency_cycles + stream + 200
