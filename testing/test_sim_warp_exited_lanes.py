"""Warp *_sync intrinsics after some of the warp's lanes have exited (simulator).

CUDA's rule for `__shfl_*_sync`, votes, matches and `__syncwarp` is that the non-exited threads named in the mask
take part; MUSA's is assumed the same. Production MUSA kernels rely on it: a row-per-lane-group RMSNorm whose
`if row < m:` guard lets the lanes of rows past the end leave while the other rows of the same warp reduce over
their own lanes with `T.shfl_xor` (sglang's MUSA layernorm_gated with 8 or 16 lanes a row). The simulator reported
"divergent __shfl_xor_sync: this thread exited while ... wait" for such a launch. A lane that has exited reads as a
lane outside the mask (all-one bits); a block barrier or a warp MMA that an exited thread leaves still fails."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

ARCHS = ["mp_31", "mp_22"]


def compile_for(func, arch):
    return tilelang.compile(func, target=f"musa -arch={arch}")


def row_sums(rows, lanes, per_block):
    """One row per `lanes` consecutive threads: each row's lanes add their elements with an xor butterfly; the
    threads of rows past `rows` end at once."""
    width = 16
    vec = width // lanes

    @T.prim_func
    def main(A: T.Tensor((rows, width), "float32"), S: T.Tensor((rows,), "float32")):
        with T.Kernel(T.ceildiv(rows, per_block), threads=per_block * lanes) as bid:
            tid = T.get_thread_binding()
            lane = tid % lanes
            row = bid * per_block + tid // lanes
            total = T.alloc_var("float32")
            if row < rows:
                total = 0.0
                for i in T.serial(vec):
                    total += A[row, lane * vec + i]
                for i in T.unroll(lanes.bit_length() - 1):
                    total += T.shfl_xor(total, (lanes // 2) >> i)
                if lane == 0:
                    S[row] = total

    return main


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("lanes", [4, 8, 16])
def test_shuffles_of_the_rows_left_after_others_exit(arch, lanes):
    rows, per_block = 9, 8  # the second block keeps one row: its other lanes of the warp exit at once
    kernel = compile_for(row_sums(rows, lanes, per_block), arch)
    assert "__shfl_xor_sync" in kernel.get_kernel_source()
    a = rand((rows, 16), torch.float32, 3)
    s = poison((rows,), torch.float32)
    kernel(a, s)
    torch.testing.assert_close(s, a.sum(1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_lane_that_exited_reads_as_outside_the_mask(arch):
    """Lane 0 reads lane 1 after lane 1 has left: undefined on the device, all-one bits (NaN) here."""

    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            if tx != 1:
                B[tx] = T.shfl_sync(A[tx], tx ^ 1)

    kernel = compile_for(main, arch)
    a = rand((32,), torch.float32, 4)
    b = torch.zeros(32)
    kernel(a, b)
    expected = a.view(16, 2).flip(1).reshape(-1)
    assert torch.isnan(b[0])
    torch.testing.assert_close(b[2:], expected[2:])
