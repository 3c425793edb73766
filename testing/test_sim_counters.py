"""The simulator's counters (issue 12): `kernel.get_profiler().counters()` on kernels whose counts are known by hand.

A warp is 32 threads on mp_31 and 128 on mp_22; the kernels below use one 32-thread warp's worth of threads per
row so the hand counts hold on both, and say where the arches differ. Sectors are 32 bytes, shared banks 32 x 4 bytes
(inferred: docs/PERF_FACTS.md)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.profiler.counters import PROFILE_ENV

ARCHS = ["mp_22", "mp_31"]
WARP = {"mp_22": 128, "mp_31": 32}


def compile_for(program, arch):
    return tilelang.compile(program, target=f"musa -arch={arch}")


def gather(stride, threads=128):
    """B[t] = A[t * stride]: one float per thread."""
    @T.prim_func
    def main(A: T.Tensor((threads * stride,), "float32"), B: T.Tensor((threads,), "float32")):
        with T.Kernel(1, threads=threads):
            tx = T.get_thread_binding()
            B[tx] = A[tx * stride]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_a_coalesced_copy_touches_one_sector_per_32_bytes(arch):
    """128 threads read 128 consecutive floats: 512 bytes, 16 sectors, one request per warp."""
    kernel = compile_for(gather(1), arch)
    a, b = rand((128,), torch.float32, 1), poison((128,), torch.float32)
    counters = kernel.get_profiler().counters([a, b])
    torch.testing.assert_close(b, a)
    assert counters.global_load_requests == 128 // WARP[arch]
    assert (counters.global_load_sectors, counters.global_load_bytes) == (16, 512)
    assert counters.global_load_efficiency == 1.0
    assert (counters.global_store_sectors, counters.global_store_bytes) == (16, 512)
    assert counters.blocks == 1


@pytest.mark.parametrize("arch", ARCHS)
def test_a_strided_copy_touches_a_sector_per_thread(arch):
    """A stride of 8 floats (32 bytes): each thread's 4 bytes sit in their own sector, 1/8 of each moved."""
    kernel = compile_for(gather(8), arch)
    a, b = rand((1024,), torch.float32, 2), poison((128,), torch.float32)
    counters = kernel.get_profiler().counters([a, b])
    torch.testing.assert_close(b, a[::8])
    assert (counters.global_load_sectors, counters.global_load_bytes) == (128, 512)
    assert counters.global_load_efficiency == 0.125
    assert counters.global_store_sectors == 16  # the stores stay coalesced


def broadcast_read(threads=128):
    """B[t] = A[t // 8]: eight lanes read each float."""
    @T.prim_func
    def main(A: T.Tensor((threads // 8,), "float32"), B: T.Tensor((threads,), "float32")):
        with T.Kernel(1, threads=threads):
            tx = T.get_thread_binding()
            B[tx] = A[tx // 8]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_lanes_reading_one_address_ask_for_its_bytes_once(arch):
    """A warp of 32 lanes reads 4 distinct floats (16 bytes, half a sector); one of 128 lanes 16 (64 bytes, two
    sectors). The efficiency is over the distinct bytes, so it never exceeds 1."""
    kernel = compile_for(broadcast_read(), arch)
    a, b = rand((16,), torch.float32, 12), poison((128,), torch.float32)
    counters = kernel.get_profiler().counters([a, b])
    torch.testing.assert_close(b, a.repeat_interleave(8))
    assert counters.global_load_bytes == 64
    assert counters.global_load_efficiency == (0.5 if WARP[arch] == 32 else 1.0)


def transpose(swizzled):
    """32 threads: S[i, tx] = A[i, tx] for each row i, then B[i, tx] = S[tx, i], i.e. a column of S per step.
    Plain, column j of S lives in one bank (32-way conflicts); swizzled, element (r, c) sits at column c ^ r."""
    @T.prim_func
    def main(A: T.Tensor((32, 32), "float32"), B: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            S = T.alloc_shared((32, 32), "float32")
            if not swizzled:  # row-major on purpose (ChooseSharedSwizzle would swizzle it): the counters' worst case
                T.annotate_layout({S: T.Layout((32, 32), lambda i, j: i * 32 + j)})
            for i in T.serial(32):
                if swizzled:
                    S[i, tx ^ i] = A[i, tx]
                else:
                    S[i, tx] = A[i, tx]
            for i in T.serial(32):
                if swizzled:
                    B[i, tx] = S[tx, i ^ tx]
                else:
                    B[i, tx] = S[tx, i]

    return main


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("swizzled", [False, True])
def test_a_shared_transpose_conflicts_unless_swizzled(arch, swizzled):
    """Row stores: 32 words in 32 banks, one wavefront each. Column loads: 32 words of one bank, 32 wavefronts each
    (31 conflicts per request), unless the columns are swizzled (element (r, c) at column c ^ r: one wavefront)."""
    kernel = compile_for(transpose(swizzled), arch)
    a, b = rand((32, 32), torch.float32, 3), poison((32, 32), torch.float32)
    counters = kernel.get_profiler().counters([a, b])
    torch.testing.assert_close(b, a.T)
    assert (counters.shared_store_requests, counters.shared_store_wavefronts) == (32, 32)
    assert counters.shared_load_requests == 32
    assert counters.shared_load_ideal_wavefronts == 32
    assert counters.shared_load_wavefronts == (32 if swizzled else 32 * 32)
    assert counters.shared_bank_conflicts == (0 if swizzled else 32 * 31)


def one_tile_gemm():
    @T.prim_func
    def main(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_l, clear_accum=True)
            T.copy(C_l, C)

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_one_gemm_tile_counts_its_matrix_instructions_and_flops(arch):
    """64 x 64 x 32 on one squad: SQMMA on mp_31 (one squad-wide instruction per shape step), warp MMA m32n32k16 on
    mp_22 (2 x 2 x 2 = 8 per 128-thread warp); either way 2 * 64 * 64 * 32 FLOPs."""
    kernel = compile_for(one_tile_gemm(), arch)
    a, b = rand((64, 32), torch.float16, 4), rand((32, 64), torch.float16, 5)
    c = poison((64, 64), torch.float32)
    counters = kernel.get_profiler().counters([a, b, c])
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)
    assert counters.mma_flops == 2 * 64 * 64 * 32
    if arch == "mp_31":
        assert counters.warp_mma == 0 and counters.sqmma >= 1
        assert counters.sqmma_flops % counters.sqmma == 0  # every instruction one shape
        [(shape, count)] = counters.mma_shapes.items()
        assert shape.startswith("sqmma m64n64k") and count == counters.sqmma
        assert count * 2 * 64 * 64 * int(shape.rsplit("k", 1)[1]) == counters.sqmma_flops
    else:
        assert counters.sqmma == 0 and counters.warp_mma == 8
        assert counters.mma_shapes == {"warp_mma m32n32k16": 8}


def test_profile_env_prints_a_table_after_each_launch(monkeypatch, capfd):
    monkeypatch.setenv(PROFILE_ENV, "1")
    kernel = compile_for(gather(1), "mp_31")
    kernel(rand((128,), torch.float32, 6), poison((128,), torch.float32))
    err = capfd.readouterr().err
    assert "[tilelang sim profile] kernel main_kernel (mp_31)" in err, err
    assert "global_load_sectors            16" in err, err


def test_a_bad_profile_value_is_a_launch_error_naming_it(monkeypatch):
    monkeypatch.setenv(PROFILE_ENV, "7")
    kernel = compile_for(gather(1), "mp_31")
    with pytest.raises(Exception, match="TILELANG_SIM_PROFILE='7' is not 0, 1, 2 or 3"):
        kernel(rand((128,), torch.float32, 7), poison((128,), torch.float32))


def block_copy(blocks):
    """B = A, 128 floats per block."""
    @T.prim_func
    def main(A: T.Tensor((blocks * 128,), "float32"), B: T.Tensor((blocks * 128,), "float32")):
        with T.Kernel(blocks, threads=128) as bx:
            tx = T.get_thread_binding()
            B[bx * 128 + tx] = A[bx * 128 + tx]

    return main


def test_counts_add_up_over_blocks_and_workers(monkeypatch):
    """Four blocks on two OS workers: each block's requests are its own (a warp never spans blocks), the launch
    sums them."""
    monkeypatch.setenv("TILELANG_SIM_WORKERS", "2")
    kernel = compile_for(block_copy(4), "mp_31")
    a, b = rand((512,), torch.float32, 8), poison((512,), torch.float32)
    counters = kernel.get_profiler().counters([a, b])
    torch.testing.assert_close(b, a)
    assert counters.blocks == 4
    assert (counters.global_load_requests, counters.global_load_sectors, counters.global_load_bytes) == (16, 64, 2048)


@pytest.mark.parametrize("arch", ARCHS)
def test_barriers_are_counted_once_per_barrier(arch):
    """The transpose has one block barrier between its stores and its loads (ThreadSync's)."""
    kernel = compile_for(transpose(False), arch)
    counters = kernel.get_profiler().counters([rand((32, 32), torch.float32, 9), poison((32, 32), torch.float32)])
    assert kernel.get_kernel_source().count("__syncthreads();") == counters.block_barriers == 1
    assert (counters.grid_blocks, counters.threads_per_block) == (1, 32)


def test_a_sample_of_blocks_runs_evenly_spaced_blocks_and_scales():
    """8 blocks, a sample of 2: blocks 0 and 4 run (only their outputs are written); scaled() gives the grid."""
    kernel = compile_for(block_copy(8), "mp_31")
    a, b = rand((1024,), torch.float32, 10), poison((1024,), torch.float32)
    counters = kernel.get_profiler().counters([a, b], sample_blocks=2)
    assert (counters.blocks, counters.grid_blocks, counters.global_load_sectors) == (2, 8, 32)
    written = [k for k in range(8) if not torch.isnan(b[k * 128:(k + 1) * 128]).any()]
    assert written == [0, 4]
    assert counters.scaled().global_load_sectors == 128 and counters.scaled().blocks == 8
