"""Kernel parameters are `__restrict__` unless T.annotate_restrict_buffers names them (tensors that may alias
keep every load and store in program order); T.tvm_storage_sync is TVM's spelling of a barrier."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand


def signature(source: str) -> str:
    return next(line for line in source.splitlines() if line.startswith('extern "C" __global__'))


def shift_program(N, may_alias):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), Z: T.Tensor((N,), "float32")):
        if may_alias:
            T.annotate_restrict_buffers(X, Y)
        with T.Kernel(N // 128, threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = X[bx * 128 + i] + Z[bx * 128 + i]

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_annotated_tensors_lose_restrict_only(arch):
    kernel = tilelang.compile(shift_program(256, True), target=f"musa -arch={arch}")
    sig = signature(kernel.get_kernel_source())
    assert re.search(r"float\* X\b", sig) and re.search(r"float\* Y\b", sig)
    assert "float* __restrict__ Z" in sig
    plain = signature(tilelang.compile(shift_program(256, False), target=f"musa -arch={arch}").get_kernel_source())
    assert plain.count("__restrict__") == 3
    x, z, y = rand((256,), torch.float32), rand((256,), torch.float32, seed=1), poison((256,), torch.float32)
    kernel(x, y, z)
    torch.testing.assert_close(y, x + z)


def test_annotate_restrict_buffers_takes_tensors_only():
    with pytest.raises(tilelang.CompileError, match="must be a global tensor") as info:
        @T.prim_func
        def main(X: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                S = T.alloc_shared((128,), "float32")
                T.annotate_restrict_buffers(S)

    assert "T.annotate_restrict_buffers(S)" in str(info.value)


def reverse_program(N, scope):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N):
            S = T.alloc_shared((N,), "float32")
            tx = T.get_thread_binding()
            S[tx] = A[tx]
            T.tvm_storage_sync(scope)
            B[tx] = S[N - 1 - tx]

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("scope", ["shared", "shared.dyn"])
def test_tvm_storage_sync_is_a_block_barrier(arch, scope):
    kernel = tilelang.compile(reverse_program(128, scope), target=f"musa -arch={arch}")
    assert "__syncthreads();" in kernel.get_kernel_source()
    a, b = rand((128,), torch.float32), poison((128,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.flip(0))


def test_tvm_storage_sync_rejects_grid_scope():
    with pytest.raises(tilelang.CompileError, match="scope 'global' is not supported on MUSA") as info:
        reverse_program(128, "global")
    assert "T.tvm_storage_sync(scope)" in str(info.value)
