"""tl.stream_k: a data-parallel GEMM kernel on a stream-K schedule (transform/stream_k.py), bit-identical to the
kernel as written, and the simulator's inter-block flags it relies on (sim/grid_flags.h)."""

import functools

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.diagnostics import TileLangWarning
from tilelang_musa.errors import CompileError
from tilelang_musa.launcher import KernelLaunchError
from tilelang_musa.transform.stream_k import persistent_blocks

ARCHS = ["mp_31", "mp_22"]


def gemm(M, N, K, bm=64, bn=64, bk=32, threads=128, swizzle=False, out_dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            if swizzle:
                T.use_swizzle(panel_size=2, order="col")
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * bm, bx * bn])

    return main


def batched_gemm(batch, M, N, K, bm=64, bn=64, bk=32):
    @T.prim_func
    def main(A: T.Tensor((batch, M, K), "float16"), B: T.Tensor((batch, K, N), "float16"),
             C: T.Tensor((batch, M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), batch, threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[bz, by * bm, k * bk], A_s)
                T.copy(B[bz, k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            for i, j in T.Parallel(bm, bn):  # an epilogue that reads the accumulator
                C[bz, by * bm + i, bx * bn + j] = acc[i, j] * 2.0

    return main


def compile_both(program, arch, blocks):
    target = f"musa -arch={arch}"
    return (tilelang.compile(program, target=target),
            tilelang.compile(program, target=target, pass_configs={"tl.stream_k": blocks}))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("blocks", [3, 5])
def test_stream_k_gemm_is_bit_identical_to_the_data_parallel_kernel(arch, blocks):
    # 16 tiles of 8 K-steps: 128 pairs over 3 or 5 blocks, so tiles split between two blocks
    M = N = K = 256
    data_parallel, streamed = compile_both(gemm(M, N, K, swizzle=True), arch, blocks)
    src = streamed.get_kernel_source()
    assert "tl::grid_flag_wait(&stream_k_flags[" in src and "tl::grid_flag_arrive(&stream_k_flags[" in src
    assert "blockIdx.y" not in src and "blockIdx.y" in data_parallel.get_kernel_source()
    assert f"dim3 grid({blocks}, 1, 1);" in streamed.get_host_source()
    a, b = rand((M, K), torch.float16, 1), rand((K, N), torch.float16, 2)
    expected, got = poison((M, N), torch.float16), poison((M, N), torch.float16)
    data_parallel(a, b, expected)
    streamed(a, b, got)
    assert torch.equal(got, expected)
    torch.testing.assert_close(got.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch", ARCHS)
def test_the_pair_is_bound_once_per_pipeline_iteration_not_copied_into_every_address(arch):
    # the kernels of test_stream_k_gemm_is_bit_identical_to_the_data_parallel_kernel[3-*] (cache hits there). The
    # pair (and its tile's block indices) substituted into every address of the 3-stage pipeline made 114 KB of
    # MUSA C with 11 KB lines on mp_22 (26 KB, 9 KB lines on mp_31) and half a minute of lowering.
    _, streamed = compile_both(gemm(256, 256, 256, swizzle=True), arch, 3)
    src = streamed.get_kernel_source()
    assert "const int pair = " in src
    assert len(src) < 24_000 and max(len(line) for line in src.splitlines()) < 1_000, src
    assert "cp_async_gs_conditional" not in src  # mp_22: the loads' bounds are still proved through the binding


@pytest.mark.parametrize("arch", ARCHS)
def test_more_blocks_than_tiles_pass_a_tile_along_a_chain(arch):
    # 4 tiles of 8 K-steps on 7 blocks: a block's whole range can lie inside one tile (continue and publish)
    M = N = 128
    K = 256
    data_parallel, streamed = compile_both(batched_gemm(1, M, N, K), arch, 7)
    a, b = rand((1, M, K), torch.float16, 3), rand((1, K, N), torch.float16, 4)
    expected, got = poison((1, M, N), torch.float32), poison((1, M, N), torch.float32)
    data_parallel(a, b, expected)
    streamed(a, b, got)
    assert torch.equal(got, expected)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_batched_grid_and_an_elementwise_epilogue(arch):
    data_parallel, streamed = compile_both(batched_gemm(2, 128, 128, 128), arch, 3)
    a, b = rand((2, 128, 128), torch.float16, 5), rand((2, 128, 128), torch.float16, 6)
    expected, got = poison((2, 128, 128), torch.float32), poison((2, 128, 128), torch.float32)
    data_parallel(a, b, expected)
    streamed(a, b, got)
    assert torch.equal(got, expected)
    torch.testing.assert_close(got, 2 * (a.float() @ b.float()), rtol=1e-3, atol=1e-3)


def test_the_flags_are_a_workspace_the_launcher_zeroes():
    # the kernel of test_stream_k_gemm_is_bit_identical_to_the_data_parallel_kernel[3-mp_31] (a cache hit there)
    kernel = tilelang.compile(gemm(256, 256, 256, swizzle=True), target="musa -arch=mp_31",
                              pass_configs={"tl.stream_k": 3})
    specs = {p.name: p for p in kernel.params}
    assert specs["stream_k_flags"].is_workspace and specs["stream_k_flags"].zeroed
    assert specs["stream_k_flags"].shape == (3, 128) and specs["stream_k_flags"].dtype == "int32"
    assert specs["stream_k_partials"].is_workspace and not specs["stream_k_partials"].zeroed
    assert specs["stream_k_partials"].shape == (3, 64, 64) and specs["stream_k_partials"].dtype == "float32"


def test_the_setting():
    assert persistent_blocks(None, "mp_31") is None and persistent_blocks(False, "mp_31") is None
    assert persistent_blocks(0, "mp_31") is None and persistent_blocks("false", "mp_31") is None
    assert persistent_blocks(True, "mp_31") == 56 and persistent_blocks("true", "mp_31") == 56
    assert persistent_blocks(7, "mp_22") == 7 and persistent_blocks("7", "mp_22") == 7
    with pytest.raises(CompileError, match="positive"):
        persistent_blocks(-2, "mp_31")
    with pytest.raises(CompileError, match="expected True"):
        persistent_blocks(2.5, "mp_31")


def test_a_kernel_outside_the_pattern_keeps_its_grid_with_a_warning():
    @T.prim_func
    def no_clear(A: T.Tensor((128, 128), "float16"), B: T.Tensor((128, 128), "float16"),
                 C: T.Tensor((128, 128), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(C[by * 64, bx * 64], acc)  # accumulates onto C: not a cleared accumulator
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[by * 64, k * 32], A_s)
                T.copy(B[k * 32, bx * 64], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * 64, bx * 64])

    with pytest.warns(TileLangWarning, match="keeps its grid as written: the T.Pipelined loop is not right after a "
                                             "T.clear"):
        kernel = tilelang.compile(no_clear, target="musa -arch=mp_31", pass_configs={"tl.stream_k": 3})
    assert "grid_flag" not in kernel.get_kernel_source() and "blockIdx.y" in kernel.get_kernel_source()


def relay(order):
    """Four blocks of one thread: "forward", block b waits for block b - 1's flag; "backward", for block b + 1's
    (never seen: blocks run in order in the simulator)."""

    @T.prim_func
    def main(flags: T.Tensor((4,), "int32"), X: T.Tensor((4,), "float32")):
        with T.Kernel(4, threads=1) as b:
            if order == "forward":
                if b > 0:
                    T.call_extern("void", "tl::grid_flag_wait", T.address_of(flags[b - 1]), 1)
                    X[b] = X[b - 1] + 1.0
                else:
                    X[b] = 1.0
                T.call_extern("void", "tl::grid_flag_arrive", T.address_of(flags[b]))
            else:
                if b < 3:
                    T.call_extern("void", "tl::grid_flag_wait", T.address_of(flags[b + 1]), 1)
                X[b] = 1.0
                T.call_extern("void", "tl::grid_flag_arrive", T.address_of(flags[b]))

    return main


@functools.cache
def compiled_relay(order):
    return tilelang.compile(relay(order), target="musa -arch=mp_31")


def run_relay(order):
    """The launch's flags and X after one run (in this process: a failed launch raises, and the next one runs)."""
    flags, x = torch.zeros(4, dtype=torch.int32), torch.zeros(4)
    compiled_relay(order)(flags, x)
    return x.tolist(), flags.tolist()


@pytest.fixture
def sim_workers(monkeypatch):
    def use(workers):
        monkeypatch.setenv("TILELANG_SIM_WORKERS", workers)
        monkeypatch.setenv("TILELANG_SIM_WATCHDOG_S", "60")

    return use


@pytest.mark.parametrize("workers", ["1", "4"])
def test_a_block_waits_for_a_flag_an_earlier_block_publishes(sim_workers, workers):
    sim_workers(workers)
    assert run_relay("forward") == ([1.0, 2.0, 3.0, 4.0], [1, 1, 1, 1])


@pytest.mark.parametrize("workers", ["1", "4"])
def test_a_wait_for_a_later_block_is_an_error_not_a_hang(sim_workers, workers):
    sim_workers(workers)
    with pytest.raises(KernelLaunchError) as failure:
        run_relay("backward")
    message = str(failure.value)
    assert "kernel main_kernel" in message and "block (0,0,0)" in message
    assert "to reach 1, which holds 0, and every earlier block has finished: no earlier block publishes it" \
        in message
    assert run_relay("forward")[0] == [1.0, 2.0, 3.0, 4.0]  # a failed launch leaves the next one working


def test_the_model_runs_a_stream_k_kernel_whole_and_charges_its_waits():
    # profiling a sample of blocks would leave the waits' publishers out: every block runs, and each block's
    # cycles include its wait for the previous block's partial (the cycle model: sim/grid_flags.h)
    data_parallel, streamed = compile_both(gemm(256, 256, 256, swizzle=True), "mp_31", 5)  # the kernels above
    a, b = rand((256, 256), torch.float16, 7), rand((256, 256), torch.float16, 8)
    modelled = streamed.get_profiler().model([a, b, poison((256, 256), torch.float16)], sample_blocks=2)
    assert modelled.simulated_blocks == modelled.grid_blocks == 5 and modelled.waves == 1
    baseline = data_parallel.get_profiler().model([a, b, poison((256, 256), torch.float16)], sample_blocks=2)
    assert baseline.simulated_blocks == 2  # a kernel without flags is still sampled
    # 5 blocks of 25.6 of the 128 K-steps each, against one block's 8 on 16 of the MPs: the same tensor work,
    # spread over fewer MPs, takes longer; the point is that it is modelled, from every block
    assert modelled.counters.block_cycles_max > baseline.counters.block_cycles_max


def publish(mode):
    """Block 1 reads what block 0 wrote: after waiting on the flag block 0 publishes after its store
    ("published"), without waiting ("missing"), or on a flag published before the store ("late")."""

    @T.prim_func
    def main(flags: T.Tensor((2,), "int32"), X: T.Tensor((2,), "float32")):
        W = T.alloc_global((2,), "float32")
        with T.Kernel(2, threads=1) as b:
            if b == 0:
                if mode == "late":
                    T.call_extern("void", "tl::grid_flag_arrive", T.address_of(flags[0]))
                W[0] = 7.0
                if mode != "late":
                    T.call_extern("void", "tl::grid_flag_arrive", T.address_of(flags[0]))
                X[0] = 1.0
            else:
                if mode != "missing":
                    T.call_extern("void", "tl::grid_flag_wait", T.address_of(flags[0]), 1)
                X[1] = W[0]

    return main


def run_publish(kernel):
    flags, x = torch.zeros(2, dtype=torch.int32), torch.zeros(2)
    kernel(flags, x)
    return x.tolist()


@pytest.mark.parametrize("mode, message", [
    ("published", None),
    ("missing", "reads what thread 0 of block 0 wrote, without waiting on a flag that thread published "
                "(tl::grid_flag_wait): a missing acquire"),
    ("late", "reads what thread 0 of block 0 wrote after its publish that this thread waited for "
             "(tl::grid_flag_arrive before the store): a late publish"),
])
def test_checked_mode_sees_a_missing_acquire_and_a_late_publish(monkeypatch, mode, message):
    kernel = tilelang.compile(publish(mode), target="musa -arch=mp_31")
    monkeypatch.setenv("TILELANG_SIM_WORKERS", "1")
    with monkeypatch.context() as checked:
        checked.setenv("TILELANG_SIM_CHECK", "1")
        if message is None:
            assert run_publish(kernel) == [1.0, 7.0]
        else:
            with pytest.raises(KernelLaunchError) as failure:
                run_publish(kernel)
            assert message in str(failure.value)
            assert "block (1,0,0)" in str(failure.value) and "kernel main_kernel" in str(failure.value)
    # without checked mode each runs (blocks in order: the data is there by the time block 1 reads it)
    assert run_publish(kernel) == [1.0, 7.0]


@pytest.mark.parametrize("arch", ARCHS)
def test_checked_mode_finds_nothing_to_report_in_a_stream_k_gemm(arch, monkeypatch):
    # every partial a block loads was published to the loading thread: no missing acquire, no late publish, no race
    # the kernels of test_stream_k_gemm_is_bit_identical_to_the_data_parallel_kernel[3-*]: checked mode is a launch
    # switch, so they are cache hits (tiles split between blocks: partials pass along the chain)
    data_parallel, streamed = compile_both(gemm(256, 256, 256, swizzle=True), arch, 3)
    a, b = rand((256, 256), torch.float16, 9), rand((256, 256), torch.float16, 10)
    expected = poison((256, 256), torch.float16)
    data_parallel(a, b, expected)
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    got = poison((256, 256), torch.float16)
    streamed(a, b, got)
    assert torch.equal(got, expected)


def test_a_sampled_profile_of_a_kernel_with_flags_says_why_a_wait_fails(monkeypatch):
    # TILELANG_SIM_PROFILE_BLOCKS runs blocks 0 and 2 of 4: block 2 waits for block 1's flag, which never runs
    for name, value in {"TILELANG_SIM_WORKERS": "1", "TILELANG_SIM_PROFILE": "1",
                        "TILELANG_SIM_PROFILE_BLOCKS": "2"}.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(KernelLaunchError) as failure:
        run_relay("forward")
    message = str(failure.value)
    assert "block (2,0,0)" in message and "no earlier block publishes it" in message
    assert "this launch profiles a sample of the grid's blocks: the publisher may be outside the sample" in message
