"""A kernel buffer allocated at the top of the function body before its kernel opens, as TVMScript-style programs
write it (`S = T.alloc_buffer(..., scope="shared")` above `for tx in T.thread_binding(...)`; upstream's parser puts it
at the function's root and moves it later): it is allocated at the top of the kernel that follows, the same program
as writing it there. A buffer used outside that kernel (before it, or in a second kernel) is an error at the
allocation's line; inside a loop or branch before the kernel it stays the old error. In a function with no kernel at
all the buffer is the function's, IR to inspect that does not compile (test_ir_only_functions.py)."""


import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from conftest import line_of, poison, rand, without_locations
from tilelang.errors import CompileError

ARCHS = ["mp_31", "mp_22"]


def _reverse_through_shared(early: bool):
    """8 threads stage 32 halves in shared memory and write them back reversed; a fragment and a var count too."""
    if early:
        @T.prim_func
        def main(A: T.Tensor((32,), T.float16), B: T.Tensor((32,), T.float16), C: T.Tensor((8,), T.int32)):
            S = T.alloc_buffer((96,), T.float16, scope="shared")
            acc = T.alloc_buffer((4,), T.float32, scope="local")
            count = T.alloc_var(T.int32, 3)
            for tx in T.thread_binding(8, "threadIdx.x"):
                for i in T.unroll(4):
                    S[tx * 4 + i] = A[tx * 4 + i]
                    acc[i] = T.cast(A[tx * 4 + i], T.float32)
                    if acc[i] > 0:
                        count += 1
                T.sync_threads()
                for i in T.unroll(4):
                    B[tx * 4 + i] = S[31 - (tx * 4 + i)]
                C[tx] = count
    else:
        @T.prim_func
        def main(A: T.Tensor((32,), T.float16), B: T.Tensor((32,), T.float16), C: T.Tensor((8,), T.int32)):
            for tx in T.thread_binding(8, "threadIdx.x"):
                S = T.alloc_buffer((96,), T.float16, scope="shared")
                acc = T.alloc_buffer((4,), T.float32, scope="local")
                count = T.alloc_var(T.int32, 3)
                for i in T.unroll(4):
                    S[tx * 4 + i] = A[tx * 4 + i]
                    acc[i] = T.cast(A[tx * 4 + i], T.float32)
                    if acc[i] > 0:
                        count += 1
                T.sync_threads()
                for i in T.unroll(4):
                    B[tx * 4 + i] = S[31 - (tx * 4 + i)]
                C[tx] = count
    return main


def test_allocation_before_the_binding_is_the_program_with_it_inside():
    tvm.ir.assert_structural_equal(without_locations(_reverse_through_shared(early=True)),
                                   without_locations(_reverse_through_shared(early=False)))


@pytest.mark.parametrize("arch", ARCHS)
def test_shared_buffer_before_the_thread_binding_runs_as_written_inside(arch):
    kernel = tilelang.compile(_reverse_through_shared(early=True), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "__shared__ __align__(16) half_t S[96];" in source and "int count = 0;" in source
    assert source == tilelang.compile(_reverse_through_shared(early=False),
                                      target=f"musa -arch={arch}").get_kernel_source()
    a = rand((32,), torch.float16, seed=21)
    b, c = poison((32,), torch.float16), torch.full((8,), -1, dtype=torch.int32)
    kernel(a, b, c)
    torch.testing.assert_close(b, a.flip(0), rtol=0, atol=0)
    torch.testing.assert_close(c, (a.view(8, 4) > 0).sum(1).int() + 3)


def _tiles_before_t_kernel(early: bool, M=64, N=32, bm=16):
    """The same rule for `with T.Kernel`: a shared tile and a fragment written just above it."""
    if early:
        @T.prim_func
        def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
            tile = T.alloc_shared((bm, N), T.float32)
            acc = T.alloc_fragment((bm, N), T.float32)
            with T.Kernel(M // bm, threads=64) as bx:
                T.copy(X[bx * bm, 0], tile)
                for i, j in T.Parallel(bm, N):
                    acc[i, j] = tile[i, j] * 2 + 1
                T.copy(acc, Y[bx * bm, 0])
    else:
        @T.prim_func
        def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
            with T.Kernel(M // bm, threads=64) as bx:
                tile = T.alloc_shared((bm, N), T.float32)
                acc = T.alloc_fragment((bm, N), T.float32)
                T.copy(X[bx * bm, 0], tile)
                for i, j in T.Parallel(bm, N):
                    acc[i, j] = tile[i, j] * 2 + 1
                T.copy(acc, Y[bx * bm, 0])
    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_tiles_before_t_kernel_run_as_written_inside(arch):
    tvm.ir.assert_structural_equal(without_locations(_tiles_before_t_kernel(early=True)),
                                   without_locations(_tiles_before_t_kernel(early=False)))
    kernel = tilelang.compile(_tiles_before_t_kernel(early=True), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "float* tile = reinterpret_cast<float*>(buf_dyn_shmem);" in source and "float acc[8];" in source
    x = rand((64, 32), torch.float32, seed=4)
    y = poison((64, 32), torch.float32)
    kernel(x, y)
    torch.testing.assert_close(y, x * 2 + 1)


def _used_before_the_kernel():
    @T.prim_func
    def main(A: T.Tensor((4,), T.float32)):
        S = T.alloc_buffer((4,), T.float32, scope="shared")  # the line
        S[0] = 1.0
        for tx in T.thread_binding(4, "threadIdx.x"):
            A[tx] = S[0]

    return main


def _used_in_a_second_kernel():
    @T.prim_func
    def main(A: T.Tensor((4,), T.float32), B: T.Tensor((4,), T.float32)):
        S = T.alloc_buffer((4,), T.float32, scope="shared")  # the line
        for tx in T.thread_binding(4, "threadIdx.x"):
            S[tx] = A[tx]
        for tx in T.thread_binding(4, "threadIdx.x"):
            B[tx] = S[tx]

    return main


def _inside_a_branch_before_the_kernel():
    @T.prim_func
    def main(A: T.Tensor((4,), T.float32), n: T.int32):
        if n > 0:
            S = T.alloc_buffer((4,), T.float32, scope="shared")  # the line
            for tx in T.thread_binding(4, "threadIdx.x"):
                S[tx] = A[tx]

    return main


@pytest.mark.parametrize("build, message", [
    (_used_before_the_kernel, r"`S` is allocated before the kernel's bindings, .* used outside that kernel"),
    (_used_in_a_second_kernel, r"`S` is allocated before the kernel's bindings, .* used outside that kernel"),
    (_inside_a_branch_before_the_kernel, r"`T.alloc_shared` must be used inside `with T.Kernel"),
])
def test_allocation_before_the_kernel_that_does_not_belong_to_it_is_an_error_at_its_line(build, message):
    with pytest.raises(CompileError, match=message) as info:
        build()
    assert info.value.loc.lineno == line_of(build, "# the line")
