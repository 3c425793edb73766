"""PlanDynamicSharedMemory lets shared tiles whose uses do not overlap share bytes.

A tile is in use from the first to the last statement of the kernel's block that references it (a loop counts
whole). Where a tile takes bytes another used before, a block barrier separates the two uses. Two 40 KiB tiles used
one after the other fit mp_22's 72 KiB; used in the same loop they keep their own bytes.
"""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

ARCHES = ["musa -arch=mp_31", "musa -arch=mp_22"]
M, N = 64, 160  # a float32 tile of 40 KiB


def _one_after_the_other():
    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32), Z: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as _:
            first = T.alloc_shared((M, N), T.float32)
            second = T.alloc_shared((M, N), T.float32)
            T.copy(X, first)
            T.copy(first, Y)
            T.copy(X, second)
            for i, j in T.Parallel(M, N):
                second[i, j] = second[i, j] * 2
            T.copy(second, Z)

    return main


@pytest.mark.parametrize("target", ARCHES)
def test_tiles_used_one_after_the_other_share_bytes_behind_a_barrier(target):
    kernel = tilelang.compile(_one_after_the_other(), target=target)
    source = kernel.get_kernel_source()
    assert "float* first = reinterpret_cast<float*>(buf_dyn_shmem);" in source
    assert "float* second = reinterpret_cast<float*>(buf_dyn_shmem);" in source
    # first's last reader (a TME store of it, waited for, on mp_31; vector loads on mp_22), then a barrier, then
    # second's first writer.
    last_read_of_first = max(source.rfind("&first[0]"), source.rfind("(first +"))
    first_write_of_second = source.index("(second +")
    assert "__syncthreads();" in source[last_read_of_first:first_write_of_second]
    x = rand((M, N), torch.float32, seed=5)
    y, z = poison((M, N), torch.float32), poison((M, N), torch.float32)
    kernel(x, y, z)
    torch.testing.assert_close(y, x)
    torch.testing.assert_close(z, x * 2)


def _in_one_loop():
    @T.prim_func
    def main(X: T.Tensor((2, 32, N), T.float32), Y: T.Tensor((2, 32, N), T.float32)):
        with T.Kernel(1, threads=128) as _:
            first = T.alloc_shared((32, N), T.float32)
            second = T.alloc_shared((32, N), T.float32)
            for k in range(2):
                T.copy(X[k, :, :], first)
                for i, j in T.Parallel(32, N):
                    second[i, j] = first[i, j] + 1
                T.copy(second, Y[k, :, :])

    return main


@pytest.mark.parametrize("target", ARCHES)
def test_tiles_used_in_one_loop_keep_their_own_bytes(target):
    kernel = tilelang.compile(_in_one_loop(), target=target)
    source = kernel.get_kernel_source()
    assert "float* first = reinterpret_cast<float*>(buf_dyn_shmem);" in source
    assert "float* second = reinterpret_cast<float*>(buf_dyn_shmem + 20480);" in source
    x = rand((2, 32, N), torch.float32, seed=6)
    y = poison((2, 32, N), torch.float32)
    kernel(x, y)
    torch.testing.assert_close(y, x + 1)


def _with_reduction_scratch_in_a_loop():
    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32), Z: T.Tensor((M, N), T.float32),
             A: T.Tensor((64, 32), T.float16), B: T.Tensor((32, 64), T.float16), R: T.Tensor((2, 64), T.float32)):
        with T.Kernel(1, threads=256) as _:
            first = T.alloc_shared((M, N), T.float32)
            second = T.alloc_shared((M, N), T.float32)
            T.copy(X, first)
            T.copy(first, Y)
            for k in range(2):
                A_s = T.alloc_shared((64, 32), T.float16)
                B_s = T.alloc_shared((32, 64), T.float16)
                acc = T.alloc_fragment((64, 64), T.float32)
                row = T.alloc_fragment((64,), T.float32)
                T.copy(A, A_s)
                T.copy(B, B_s)
                # two warp groups split the columns: the row maximum meets in a scratch tile the reduction
                # allocates inside this loop
                T.gemm(A_s, B_s, acc, clear_accum=True, policy=T.GemmWarpPolicy.FullCol)
                for i, j in T.Parallel(64, 64):
                    acc[i, j] = acc[i, j] * (k + 1)
                T.reduce_max(acc, row, dim=1)
                T.copy(row, R[k, :])
            T.copy(X, second)
            for i, j in T.Parallel(M, N):
                second[i, j] = second[i, j] * 2
            T.copy(second, Z)

    return main


@pytest.mark.parametrize("target", ARCHES)
def test_a_scratch_tile_inside_a_loop_leaves_the_other_tiles_sharing_bytes(target):
    """The reduction's scratch tile is allocated inside the loop; the kernel's tiles still share bytes by their
    uses (before, the nested allocation made every tile keep its own bytes: 89 KiB, over mp_22's 72 KiB)."""
    kernel = tilelang.compile(_with_reduction_scratch_in_a_loop(), target=target)
    source = kernel.get_kernel_source()
    assert "float* row_red_buf = reinterpret_cast<float*>(buf_dyn_shmem + " in source
    assert "float* second = reinterpret_cast<float*>(buf_dyn_shmem);" in source
    x = rand((M, N), torch.float32, seed=7)
    a, b = rand((64, 32), torch.float16, seed=8), rand((32, 64), torch.float16, seed=9)
    y, z, r = poison((M, N), torch.float32), poison((M, N), torch.float32), poison((2, 64), torch.float32)
    kernel(x, y, z, a, b, r)
    torch.testing.assert_close(y, x)
    torch.testing.assert_close(z, x * 2)
    product = a.float() @ b.float()
    torch.testing.assert_close(r, torch.stack([product.amax(1), (2 * product).amax(1)]), rtol=1e-3, atol=1e-3)


# Rows of a float16 tile of 128 columns such that two tiles fit the arch's shared memory and three do not.
ROWS_FOR_TWO = {"musa -arch=mp_31": 384, "musa -arch=mp_22": 128}


def _under_a_block_uniform_branch(rows):
    @T.prim_func
    def main(X: T.Tensor((2, rows, 128), T.float16), n: T.int32, Y: T.Tensor((2, rows, 128), T.float16)):
        with T.Kernel(2, threads=128) as bx:
            a = T.alloc_shared((rows, 128), T.float16)
            b = T.alloc_shared((rows, 128), T.float16)
            c = T.alloc_shared((rows, 128), T.float16)
            if bx < n:
                T.copy(X[bx, :, :], a)
                for i, j in T.Parallel(rows, 128):
                    b[i, j] = a[i, j] * T.float16(2)
                for i, j in T.Parallel(rows, 128):
                    c[i, j] = b[i, j] + T.float16(1)
                T.copy(c, Y[bx, :, :])

    return main


@pytest.mark.parametrize("target", ARCHES)
def test_tiles_used_in_turn_under_a_block_uniform_branch_share_bytes_when_they_would_not_fit(target):
    """Every use sits in `if bx < n:` (block_causal_attention varlen's dq kernel, whose six 32 KiB tiles exceed mp_31's
    192 KiB): counted as one statement, the three tiles would not fit; counted over the branch's statements, `c` takes
    `a`'s bytes (a is done before c starts) behind a barrier. A kernel that fits keeps the statement-level plan."""
    kernel = tilelang.compile(_under_a_block_uniform_branch(ROWS_FOR_TWO[target]), target=target)
    source = kernel.get_kernel_source()
    assert "half_t* a = reinterpret_cast<half_t*>(buf_dyn_shmem);" in source
    assert "half_t* c = reinterpret_cast<half_t*>(buf_dyn_shmem);" in source
    rows = ROWS_FOR_TWO[target]
    x = rand((2, rows, 128), torch.float16, seed=7)
    y = poison((2, rows, 128), torch.float16)
    kernel(x, 1, y)
    torch.testing.assert_close(y[0], x[0] * 2 + 1)
    assert torch.isnan(y[1]).all()  # block 1 took no branch
