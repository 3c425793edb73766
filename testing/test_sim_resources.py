"""The simulator gives its fiber stacks back when a launch ends: every kernel library carries its own copy of the
simulator, and stacks kept per library (two memory mappings per guarded stack) once exhausted the process's
mapping limit in a long test run ("cannot protect the guard page of fiber stack 90")."""

import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand


def mapping_count() -> int:
    with open("/proc/self/maps") as maps:
        return sum(1 for _ in maps)


def test_a_launch_leaves_no_fiber_stacks_mapped():
    @T.prim_func
    def wide(A: T.Tensor((4096,), "float32"), B: T.Tensor((4096,), "float32")):
        with T.Kernel(4, threads=1024) as bx:
            tx = T.get_thread_binding()
            B[bx * 1024 + tx] = A[bx * 1024 + tx] * 2.0

    kernel = tilelang.compile(wide)
    a, b = rand((4096,), torch.float32, 81), poison((4096,), torch.float32)
    before = mapping_count()
    for _ in range(3):
        kernel(a, b)
    # 1024 guarded stacks per worker would be 2048 mappings each; allow a little for the allocator
    assert mapping_count() - before < 64
    torch.testing.assert_close(b, a * 2.0)
