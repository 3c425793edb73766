"""The performance model (issue 12; tilelang_musa/profiler/model.py): a launch's counters and the arch's figures
composed into a modelled time, by hand on made-up counters, and end to end on kernels whose limiting resource is
known (a stream is DRAM-bound, a large-tile GEMM tensor-bound on its pipes)."""

import dataclasses

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.profiler.arch_figures import ARCH_FIGURES, figures_for, sim_timing_flags
from tilelang_musa.profiler.counters import Counters
from tilelang_musa.profiler.model import (BASE_REGISTERS, RESOURCES, asynchronous_wait_cycles, latency_chain_cycles,
                                          model_launch, occupancy, registers_per_thread)

ARCHS = ["mp_22", "mp_31"]


def without_latencies(arch):
    """The arch's figures without the dependent and shuffle latencies: the tests of the other terms (each latency
    has its own test)."""
    return dataclasses.replace(figures_for(arch), dependent_latency_cycles=0.0, shuffle_latency_cycles=0.0)


def made_up_counters(**values):
    zeros = {f.name: 0 for f in dataclasses.fields(Counters) if f.name != "mma_shapes"}
    zeros["arithmetic_chain_units"] = -1  # not counted: every arithmetic instruction on the chain
    return Counters(**{**zeros, "kernel": "k", **values})


def test_a_launch_is_composed_from_its_counters_by_hand():
    """1120 blocks of 256 threads and 48 KiB on the S5000: 4 blocks per MP (192 KiB), 1120 / (56 * 4) = 5 waves;
    per block 1000 cycles of critical path, 800 warp instructions and 400 cycles of tensor work: a round of 4
    blocks is 1600 tensor cycles. (No dependent latency: that term has its own test.)"""
    f = dataclasses.replace(figures_for("mp_31"), dependent_latency_cycles=0.0)
    counters = made_up_counters(grid_blocks=1120, threads_per_block=256, dynamic_smem_bytes=48 * 1024, blocks=16,
                                block_cycles=16 * 1000, tensor_cycles=16 * 400, sqmma_flops=16 * 400 * 4096,
                                arithmetic_instructions=16 * 700, shared_load_requests=16 * 100,
                                shared_load_wavefronts=16 * 100, tme_load_bytes=16 * 4096)
    m = model_launch(counters, f, distinct_bytes=1 << 20, registers=64)
    assert (m.blocks_per_mp, m.occupancy_limit, m.waves) == (4, "shared_memory", 5)
    cycles = {"critical_path": 1000, "issue": 4 * (700 + 100) / f.warp_instructions_per_cycle, "tensor": 4 * 400,
              "shared": 4 * 100 / f.shared_wavefronts_per_cycle, "l2": 4 * 4096 / f.transfer_bytes_per_cycle,
              "dram": 4 * (1 << 20) / 1120 / (f.dram_bytes_per_s * f.dram_efficiency / f.mps / f.clock_hz)}
    assert set(m.resource_seconds) == set(RESOURCES)
    for name, value in cycles.items():
        assert m.resource_seconds[name] == pytest.approx(5 * value / f.clock_hz), name
    assert m.limiter == "tensor"
    assert m.seconds == pytest.approx(5 * 1600 / f.clock_hz + f.launch_seconds)
    assert m.tflops == pytest.approx(1120 * 400 * 4096 / m.seconds / 1e12)
    assert m.roofline_seconds == pytest.approx(1120 * 400 / f.mps / f.clock_hz) and m.roofline_seconds < m.seconds
    assert m.l2_reuse == pytest.approx(1120 * 4096 / (1 << 20))


def test_a_grid_in_one_wave_takes_its_longest_block():
    """Two blocks on the S5000 (one wave): 1000 and 3000 cycles of critical path. The launch ends with the longer
    one, 3000 cycles, not the mean 2000 (GDN prefill over sequences of different lengths, issue 40)."""
    f = without_latencies("mp_31")
    counters = made_up_counters(grid_blocks=2, threads_per_block=128, blocks=2, block_cycles=4000,
                                block_cycles_max=3000, arithmetic_instructions=2 * 400)
    m = model_launch(counters, f, distinct_bytes=0, registers=64)
    assert m.waves == 1 and m.limiter == "critical_path"
    assert m.resource_seconds["critical_path"] == pytest.approx(3000 / f.clock_hz)
    # the longer block's MP (one block on each of two MPs) issues 1.5x the mean block's instructions
    assert m.resource_seconds["issue"] == pytest.approx(1.5 * 400 / f.warp_instructions_per_cycle / f.clock_hz)
    # many waves of equal blocks: the waves' sum, as before
    many = model_launch(made_up_counters(grid_blocks=56 * 8 * 4, threads_per_block=128, blocks=2, block_cycles=2000,
                                         block_cycles_max=1000), f, 0, 64)
    assert many.waves == 4 and many.resource_seconds["critical_path"] == pytest.approx(4 * 1000 / f.clock_hz)


def test_a_grid_smaller_than_the_mps_slots_charges_each_mp_for_the_blocks_it_runs():
    """16 blocks of 128 threads on the S5000: occupancy allows 16 blocks per MP, but the 16 blocks go one to each of
    16 MPs. The busiest MP issues one block's instructions, not 16 blocks' (issue 40: the round terms used to be
    multiplied by the occupancy even below one wave)."""
    f = without_latencies("mp_31")
    counters = made_up_counters(grid_blocks=16, threads_per_block=128, blocks=16, block_cycles=16 * 1000,
                                block_cycles_max=1000, arithmetic_instructions=16 * 40_000)
    m = model_launch(counters, f, distinct_bytes=0, registers=32)
    assert (m.blocks_per_mp, m.waves) == (16, 1)
    one_block_issue = 40_000 / f.warp_instructions_per_cycle / f.clock_hz
    assert m.resource_seconds["issue"] == pytest.approx(one_block_issue)  # was 16x
    assert m.limiter == "issue" and m.seconds == pytest.approx(one_block_issue + f.launch_seconds)
    # 57 blocks: the busiest MP runs two
    two = model_launch(dataclasses.replace(counters, grid_blocks=57), f, distinct_bytes=0, registers=32)
    assert two.resource_seconds["issue"] == pytest.approx(2 * one_block_issue)


def test_dram_is_the_chips_bandwidth_however_few_mps_are_busy():
    """16 blocks reading 64 MiB between them: the DRAM term is the bytes at the chip's sustained bandwidth (it used
    to give each of the 16 busy MPs 1/56 of it, and multiply by the 16 blocks an MP could hold)."""
    f = figures_for("mp_31")
    counters = made_up_counters(grid_blocks=16, threads_per_block=128, blocks=16, block_cycles=16 * 10,
                                block_cycles_max=10)
    m = model_launch(counters, f, distinct_bytes=64 << 20, registers=32)
    assert m.resource_seconds["dram"] == pytest.approx((64 << 20) / (f.dram_bytes_per_s * f.dram_efficiency))
    assert m.limiter == "dram"


def test_a_tensor_updated_in_place_crosses_dram_twice():
    """A launch that reads a 32 MiB state and writes it back: its DRAM term is 64 MiB plus the other tensors, not
    the state's storage once; never more than the stores wrote (a tensor named in place but not written)."""
    f = figures_for("mp_31")
    state, other = 32 << 20, 1 << 20
    counters = made_up_counters(grid_blocks=4096, threads_per_block=128, blocks=8, block_cycles=8 * 10,
                                block_cycles_max=10, global_store_bytes=state * 8 // 4096)
    sustained = f.dram_bytes_per_s * f.dram_efficiency
    once = model_launch(counters, f, distinct_bytes=state + other, registers=32)
    twice = model_launch(counters, f, distinct_bytes=state + other, registers=32, in_place_bytes=state)
    assert once.resource_seconds["dram"] == pytest.approx((state + other) / sustained)
    assert twice.resource_seconds["dram"] - once.resource_seconds["dram"] == pytest.approx(state / sustained)
    assert twice.seconds - once.seconds == pytest.approx(state / sustained)
    assert twice.roofline_seconds == pytest.approx((2 * state + other) / f.dram_bytes_per_s)
    unwritten = model_launch(dataclasses.replace(counters, global_store_bytes=0), f, state + other, 32, state)
    assert unwritten.resource_seconds["dram"] == pytest.approx(once.resource_seconds["dram"])


def test_dependent_latency_lengthens_each_blocks_critical_path_by_its_warps_chains():
    """A block of 4 warps (128 threads on the S5000) with 4 x 3000 arithmetic instructions: the cycle model charged
    each warp's 3000 one cycle each; with a dependent latency of 12 every one waits 12, 11 x 3000 cycles more on
    the critical path (and on the longest block's). 0 leaves the model as it was."""
    f = dataclasses.replace(figures_for("mp_31"), dependent_latency_cycles=0.0)
    counters = made_up_counters(grid_blocks=56, threads_per_block=128, blocks=8, block_cycles=8 * 5000,
                                block_cycles_max=6000, arithmetic_instructions=8 * 4 * 3000)
    plain = model_launch(counters, f, distinct_bytes=0, registers=32)
    chained = model_launch(counters, dataclasses.replace(f, dependent_latency_cycles=12.0), 0, 32)
    assert plain.resource_seconds["critical_path"] == pytest.approx(6000 / f.clock_hz)
    assert chained.resource_seconds["critical_path"] == pytest.approx((6000 + 11 * 3000) / f.clock_hz)
    assert chained.seconds - plain.seconds == pytest.approx(11 * 3000 / f.clock_hz)
    # many waves: each wave's mean block is longer by the same chain
    many = dataclasses.replace(counters, grid_blocks=56 * 16 * 3, block_cycles_max=5000)
    assert (model_launch(many, dataclasses.replace(f, dependent_latency_cycles=12.0), 0, 32)
            .resource_seconds["critical_path"] == pytest.approx(3 * (5000 + 11 * 3000) / f.clock_hz))


def test_shuffle_latency_lengthens_each_blocks_critical_path_and_shuffles_are_issued():
    """A block of 4 warps with 4 x 200 warp shuffles: each shuffle is a warp instruction (the issue term), and with a
    shuffle latency of 30 each warp's 200 shuffles wait 30 cycles each on the critical path (the cycle model lets
    a shuffle's lanes leave it at once). 0 adds nothing to the path."""
    f = dataclasses.replace(figures_for("mp_31"), shuffle_latency_cycles=0.0, dependent_latency_cycles=0.0)
    counters = made_up_counters(grid_blocks=56, threads_per_block=128, blocks=8, block_cycles=8 * 5000,
                                block_cycles_max=5000, arithmetic_instructions=8 * 4 * 100, warp_shuffles=8 * 4 * 200)
    plain = model_launch(counters, f, distinct_bytes=0, registers=32)
    assert plain.resource_seconds["critical_path"] == pytest.approx(5000 / f.clock_hz)
    assert plain.resource_seconds["issue"] == pytest.approx(4 * (100 + 200) / f.warp_instructions_per_cycle
                                                             / f.clock_hz)
    slow = model_launch(counters, dataclasses.replace(f, shuffle_latency_cycles=30.0), 0, 32)
    assert slow.resource_seconds["critical_path"] == pytest.approx((5000 + 30 * 200) / f.clock_hz)
    assert slow.seconds - plain.seconds == pytest.approx(30 * 200 / f.clock_hz)
    # with a dependent latency too, both chains add up
    both = model_launch(counters, dataclasses.replace(f, shuffle_latency_cycles=30.0, dependent_latency_cycles=5.0),
                        0, 32)
    assert both.resource_seconds["critical_path"] == pytest.approx((5000 + 30 * 200 + 4 * 100) / f.clock_hz)


def test_latency_chains_hide_behind_a_warps_waits_for_work_that_runs_beside_it():
    """The same 4 warps of 3000 arithmetic instructions and 200 shuffles (11 x 3000 + 30 x 200 = 39,000 cycles of
    chain a warp at latencies 12 and 30), now each waiting 10,000 cycles for its SQMMA, 8,000 for its copies and
    6,000 for a producer's async-barrier phases: the chain reaches those waits later and the work behind them has
    gone on meanwhile, so only 39,000 - 24,000 cycles lengthen the path. Block-barrier waits hide nothing (the warps
    waited for are as late); a chain shorter than the waits adds nothing."""
    f = dataclasses.replace(figures_for("mp_31"), dependent_latency_cycles=12.0, shuffle_latency_cycles=30.0)
    waits = dict(mma_wait_stall_cycles=8 * 4 * 10000, copy_wait_stall_cycles=8 * 4 * 8000,
                 async_barrier_stall_cycles=8 * 4 * 6000)
    counters = made_up_counters(grid_blocks=56, threads_per_block=128, blocks=8, block_cycles=8 * 50000,
                                block_cycles_max=50000, arithmetic_instructions=8 * 4 * 3000,
                                warp_shuffles=8 * 4 * 200, barrier_stall_cycles=8 * 4 * 20000, **waits)
    assert asynchronous_wait_cycles(counters, f) == pytest.approx(24000)
    assert latency_chain_cycles(counters, f) == pytest.approx(39000 - 24000)
    m = model_launch(counters, f, distinct_bytes=0, registers=32)
    assert m.resource_seconds["critical_path"] == pytest.approx((50000 + 15000) / f.clock_hz)
    # without the asynchronous waits the whole chain is paid; with longer ones none of it
    bare = dataclasses.replace(counters, mma_wait_stall_cycles=0, copy_wait_stall_cycles=0,
                               async_barrier_stall_cycles=0)
    assert latency_chain_cycles(bare, f) == pytest.approx(39000)
    hidden = dataclasses.replace(counters, mma_wait_stall_cycles=8 * 4 * 40000)
    assert latency_chain_cycles(hidden, f) == 0.0
    assert model_launch(hidden, f, 0, 32).resource_seconds["critical_path"] == pytest.approx(50000 / f.clock_hz)


def lane_rank(blocks, lanes):
    """Each thread's rank among the first `lanes` lanes of its warp, by value (ties to the lower lane), read through
    `lanes` shuffles a warp, as Moore Threads' top-k group kernel ranks its groups."""
    @T.prim_func
    def main(X: T.Tensor((blocks, 256), "float32"), R: T.Tensor((blocks, 256), "int32")):
        with T.Kernel(blocks, threads=256) as b:
            tx = T.get_thread_binding()
            lane = tx % lanes
            mine = T.alloc_var("float32", init=X[b, tx])
            rank = T.alloc_var("int32", init=0)
            for i in T.unroll(lanes):
                other = T.shfl_sync(mine, i)
                if other > mine or (other == mine and i < lane):
                    rank += 1
            R[b, tx] = rank

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_the_simulator_counts_warp_shuffles_and_the_model_charges_them(arch):
    """8 blocks of 256 threads, 16 shuffles a warp: the counter says 8 x warps x 16 on both arches (mp_22's warps are
    128 lanes: 2 a block; mp_31's 32: 8), the ranks match torch, and a shuffle latency moves the modelled time by
    exactly 16 x the latency (the block's critical path limits this launch)."""
    f = dataclasses.replace(figures_for(arch), shuffle_latency_cycles=0.0)
    blocks, lanes = 8, 16
    kernel = tilelang.compile(lane_rank(blocks, lanes), target=f"musa -arch={arch}")
    assert kernel.get_kernel_source().count("__shfl_sync(") >= 1
    x = rand((blocks, 256), torch.float32, 5)
    r = torch.full((blocks, 256), -7, dtype=torch.int32)
    counters = kernel.get_profiler().counters([x, r])
    warp = 128 if arch == "mp_22" else 32
    base = torch.arange(256) // warp * warp  # the lane 0 of each thread's warp
    candidates = x[:, base[:, None] + torch.arange(lanes)]  # (blocks, thread, i): the value of lane i of its warp
    mine, lane = x[:, :, None], (torch.arange(256) % lanes)[None, :, None]
    expected = ((candidates > mine) | ((candidates == mine) & (torch.arange(lanes) < lane))).sum(-1)
    torch.testing.assert_close(r, expected.to(torch.int32))
    warps = blocks * 256 // warp
    assert counters.warp_shuffles == warps * lanes
    plain = model_launch(counters, f, distinct_bytes=2 * 4 * blocks * 256, registers=32)
    slow = model_launch(counters, dataclasses.replace(f, shuffle_latency_cycles=40.0), 2 * 4 * blocks * 256, 32)
    assert plain.limiter == slow.limiter == "critical_path"
    assert slow.seconds - plain.seconds == pytest.approx(40.0 * lanes / f.clock_hz)


def test_the_s5000_calibration_fits_only_assumed_composition_figures_on_its_grids():
    """benchmark/s5000_calibration.py's fitted figures are [A] figures of the composition, each a value on its grid,
    and arch_figures.py's S5000 figures are exactly them (one set of figures: the fit is what is committed)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmark" / "s5000_calibration.py"
    spec = importlib.util.spec_from_file_location("s5000_calibration", path)
    calibration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(calibration)
    s5000 = figures_for("mp_31")
    for name, value in calibration.FITTED.items():
        assert s5000.provenance[name].startswith("[A]"), name
        assert value in calibration.GRIDS[name], name
        assert getattr(s5000, name) == value, name
    calibrated = calibration.calibrated_figures()["mp_31"]
    assert {name: getattr(calibrated, name) for name in calibration.FITTED} == calibration.FITTED
    assert calibrated.warp_instructions_per_cycle == s5000.warp_instructions_per_cycle  # not fitted


def decay_state(N, threads=256, per_thread=8):
    """S = 0.5 * S + X, in place."""
    @T.prim_func
    def main(S: T.Tensor((N,), "float32"), X: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, threads * per_thread), threads=threads) as b_x:
            for i, j in T.Parallel(threads, per_thread):
                offsets = (b_x * threads + i) * per_thread
                S[offsets + j] = S[offsets + j] * 0.5 + X[offsets + j]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_the_profiler_counts_a_state_named_in_place_twice(arch):
    f = figures_for(arch)
    N = 1 << 22
    kernel = tilelang.compile(decay_state(N), target=f"musa -arch={arch}")
    s, x = rand((N,), torch.float32, 1), rand((N,), torch.float32, 2)
    expected = s[:2048] * 0.5 + x[:2048]
    once = kernel.get_profiler().model([s.clone(), x], sample_blocks=8)
    state = s.clone()
    twice = kernel.get_profiler().model([state, x], sample_blocks=8, in_place=[state])
    torch.testing.assert_close(state[:2048], expected)
    assert once.limiter == twice.limiter == "dram"
    sustained = f.dram_bytes_per_s * f.dram_efficiency
    assert once.resource_seconds["dram"] == pytest.approx(8 * N / sustained)
    assert twice.seconds - once.seconds == pytest.approx(4 * N / sustained)
    with pytest.raises(ValueError, match="item 0 is not one of the launch's tensors"):
        kernel.get_profiler().model([s.clone(), x], sample_blocks=1, in_place=[torch.zeros(N)])
    with pytest.raises(ValueError, match="pass them in input_tensors"):
        kernel.get_profiler().model(sample_blocks=1, in_place=[state])


def uneven_blocks(n):
    """Block b stores b * 64 * n / 3 values one after another in one thread: its critical path grows with b."""

    @T.prim_func
    def main(Y: T.Tensor((4, 64 * n), "float32")):
        with T.Kernel(4, threads=32) as b:
            tx = T.get_thread_binding()
            if tx == 0:
                for i in T.serial(b * 64 * n // 3):
                    Y[b, i] = T.Cast("float32", i)

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_grid_of_uneven_blocks_is_modelled_by_its_longest(arch):
    f = figures_for(arch)
    kernel = tilelang.compile(uneven_blocks(3), target=f"musa -arch={arch}")
    y = torch.zeros((4, 192), dtype=torch.float32)
    m = kernel.get_profiler().model([y])
    c = m.counters
    assert c.block_cycles_max > 1.5 * c.block_cycles / c.blocks  # block 3 is far longer than the mean
    chain = latency_chain_cycles(c, f)  # each block's, the mean warp's
    assert m.waves == 1 and m.resource_seconds["critical_path"] == pytest.approx((c.block_cycles_max + chain)
                                                                                 / f.clock_hz)
    assert m.seconds == pytest.approx(max(m.resource_seconds.values()) + f.launch_seconds)


def test_occupancy_is_bounded_by_threads_shared_memory_and_block_slots_and_registers_only_beyond_one_block():
    f = figures_for("mp_31")
    small = made_up_counters(threads_per_block=64, dynamic_smem_bytes=0, grid_blocks=1, blocks=1)
    assert occupancy(small, f, BASE_REGISTERS) == (f.max_blocks_per_mp, "block_slots")
    wide = dataclasses.replace(small, threads_per_block=1024)
    assert occupancy(wide, f, BASE_REGISTERS) == (f.threads_per_mp // 1024, "threads")
    assert occupancy(wide, f, 255) == (1, "registers")  # over the register file: still one block (it spills)
    too_big = dataclasses.replace(small, dynamic_smem_bytes=f.shared_memory_per_mp + 1)
    with pytest.raises(ValueError, match="does not fit an MP of the MTT S5000: shared_memory"):
        occupancy(too_big, f, BASE_REGISTERS)


def test_registers_are_estimated_from_the_kernels_local_arrays():
    source = """
  extern __shared__ __align__(1024) unsigned char buf_dyn_shmem[];
  __align__(16) float acc[128];
  half_t cast[64];
  int idx[3];
"""
    assert registers_per_thread(source) == BASE_REGISTERS + 128 + 32 + 3


def test_every_arch_with_figures_gives_the_simulator_its_timing():
    for arch, f in ARCH_FIGURES.items():
        flags = sim_timing_flags(arch)
        assert f"-DTL_SIM_TIMING_TENSOR16={f.tensor_flops_per_cycle.get(16, f.warp_mma_flops_per_cycle)!r}" in flags
        assert len([flag for flag in flags if flag.startswith("-DTL_SIM_TIMING_")]) == 8
        # the residency a cooperative launch is checked against (sim/grid_barrier_outlined.h)
        assert [flag for flag in flags if flag.startswith("-DTL_SIM_MP_")] == [
            f"-DTL_SIM_MP_COUNT={f.mps}", f"-DTL_SIM_MP_THREADS={f.threads_per_mp}",
            f"-DTL_SIM_MP_SHARED_BYTES={f.shared_memory_per_mp}", f"-DTL_SIM_MP_BLOCKS={f.max_blocks_per_mp}"]
        assert all(name in f.provenance for name in ("mps", "clock_hz", "dram_bytes_per_s")), arch
    assert sim_timing_flags("mp_21") == []
    with pytest.raises(ValueError, match="no performance figures for arch 'mp_21'"):
        figures_for("mp_21")


def stream(N, threads=256, per_thread=8):
    """The user's elementwise add."""
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, threads * per_thread), threads=threads) as b_x:
            for i, j in T.Parallel(threads, per_thread):
                offsets = (b_x * threads + i) * per_thread
                C[offsets + j] = A[offsets + j] + B[offsets + j]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_large_stream_is_dram_bound_at_the_sustained_bandwidth(arch):
    """2^24 floats in, 2^24 in, 2^24 out: 192 MiB at the sustained DRAM rate, from a sample of 8 of the 8192
    blocks; the written sample matches torch."""
    f = figures_for(arch)
    N = 1 << 24
    kernel = tilelang.compile(stream(N), target=f"musa -arch={arch}")
    a, b, c = rand((N,), torch.float32, 1), rand((N,), torch.float32, 2), poison((N,), torch.float32)
    m = kernel.get_profiler().model([a, b, c], sample_blocks=8)
    assert (m.simulated_blocks, m.grid_blocks) == (8, N // 2048)
    torch.testing.assert_close(c[:2048], a[:2048] + b[:2048])
    assert m.limiter == "dram"
    sustained = f.dram_bytes_per_s * f.dram_efficiency  # less the launch and the last wave's idle MPs
    assert 0.85 * sustained < m.dram_gbps * 1e9 <= sustained
    assert m.seconds >= m.roofline_seconds == pytest.approx(3 * 4 * N / f.dram_bytes_per_s)
    assert m.tflops == 0 and m.l2_reuse == pytest.approx(1.0)


def big_tile_gemm(M, N, K):
    """The README's GEMM tile (256x256x64, 512 threads, 3 stages)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, 256), T.ceildiv(M, 256), threads=512) as (bx, by):
            A_s = T.alloc_shared((256, 64), "float16")
            B_s = T.alloc_shared((64, 256), "float16")
            C_l = T.alloc_fragment((256, 256), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, 64), num_stages=3):
                T.copy(A[by * 256, k * 64], A_s)
                T.copy(B[k * 64, bx * 256], B_s)
                T.gemm(A_s, B_s, C_l, policy=T.GemmWarpPolicy.Square)
            T.copy(C_l, C[by * 256, bx * 256])

    return main


def test_a_large_tile_gemm_on_the_s5000_keeps_its_tensor_pipes_busy():
    """2048^3 with 256x256x64 tiles: 64 blocks on 56 MPs (2 waves), the TME ring hides the loads behind SQMMA, so
    the block's critical path is within 25% of its tensor work and the time within the bounds of the roofline."""
    kernel = tilelang.compile(big_tile_gemm(2048, 2048, 2048), target="musa -arch=mp_31")
    a, b = rand((2048, 2048), torch.float16, 3), rand((2048, 2048), torch.float16, 4)
    m = kernel.get_profiler().model([a, b, poison((2048, 2048), torch.float16)], sample_blocks=2)
    c = m.counters
    assert c.tme_load_bytes > 0 and c.sqmma > 0
    assert c.tensor_cycles <= c.block_cycles < 1.25 * c.tensor_cycles
    assert m.waves == 2 and m.limiter in ("critical_path", "tensor")
    assert m.roofline_seconds < m.seconds < 2.5 * m.roofline_seconds  # two waves for 64 blocks on 56 MPs
    assert 0 < m.tflops < figures_for("mp_31").peak_tensor_flops / 1e12


def test_model_names_the_arch_and_prints_a_table():
    kernel = tilelang.compile(stream(1 << 12), target="musa -arch=mp_22")
    m = kernel.get_profiler().model()
    assert (m.arch, m.device, m.simulated_blocks) == ("mp_22", "MTT S4000", 2)
    table = m.table()
    assert "modelled time" in table and "limited by" in table and "occupancy" in table
