"""Upstream's submodule paths through `T`: upstream's `tilelang.language` is a package whose submodules are its
attributes, so scripts write `T.builtin.sync_threads()` (Anjiang-Wei/tilelang_PTX's gemm1.py). Our `T` keeps no
implementation modules; each upstream submodule name resolves to the same flat function."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand


def test_module_paths_resolve_to_the_flat_functions():
    assert T.builtin.sync_threads is T.sync_threads
    assert T.builtin.shfl_xor is T.shfl_xor
    assert T.allocate.alloc_shared is T.alloc_shared
    assert T.tir.call_extern is T.call_extern
    assert T.copy_op.copy is T.copy and T.reduce_op.reduce_sum is T.reduce_sum
    assert callable(T.copy) and callable(T.reduce)  # names that are functions of T stay functions


def test_a_missing_name_names_the_whole_path():
    with pytest.raises(AttributeError, match=r"T\.builtin\.tma_load_2sm"):
        T.builtin.tma_load_2sm


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_builtin_sync_threads_orders_a_shared_exchange(arch):
    n = 128

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=n):
            s = T.alloc_shared((n,), "float32")
            tx = T.get_thread_binding()
            s[tx] = A[tx] * 2.0
            T.builtin.sync_threads()
            B[tx] = s[n - 1 - tx]

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "__syncthreads()" in kernel.get_kernel_source()
    a, b = rand((n,), torch.float32, 3), poison((n,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.flip(0) * 2)
