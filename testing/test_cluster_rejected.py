"""Thread-block clusters (`T.ClusterKernel`, `T.cluster_sync`, ...), which upstream's and Moore Threads' test files
call: each is an UnsupportedError naming the construct and the user's line, not an AttributeError from
`tilelang.language`. (The grid barrier `T.sync_grid` is provided: testing/test_sync_grid.py.)"""

import pytest

import tilelang
import tilelang.language as T

CLUSTER_CALLS = ["cluster_arrive", "cluster_arrive_relaxed", "cluster_wait", "cluster_sync", "block_rank_in_cluster"]


def test_cluster_kernel_names_the_construct_and_the_line():
    with pytest.raises(tilelang.UnsupportedError, match=r"T.ClusterKernel \(thread-block clusters; .*T.Kernel\) is "
                                                        r"NVIDIA-specific") as info:
        @T.prim_func
        def main(A: T.Tensor((128,), "int32")):
            with T.ClusterKernel(128, threads=128, cluster_dims=(2, 1, 1)) as bx:
                A[bx] = 1
    assert "with T.ClusterKernel(128, threads=128, cluster_dims=(2, 1, 1)) as bx:" in str(info.value)


@pytest.mark.parametrize("name", CLUSTER_CALLS)
def test_cluster_calls_are_rejected_by_name(name):
    with pytest.raises(tilelang.UnsupportedError, match=rf"T.{name} \(thread-block clusters") as info:
        @T.prim_func
        def main(A: T.Tensor((128,), "int32")):
            with T.Kernel(128, threads=128) as bx:
                getattr(T, name)()
                A[bx] = 1
    assert "getattr(T, name)()" in str(info.value)


def test_alloc_cluster_barrier_is_rejected_by_name():
    with pytest.raises(tilelang.UnsupportedError, match=r"T.alloc_cluster_barrier \(thread-block clusters"):
        @T.prim_func
        def main(A: T.Tensor((128,), "int32")):
            with T.Kernel(128, threads=128) as bx:
                mbar = T.alloc_cluster_barrier([256])
                A[bx] = mbar
