"""Kernels written as TVMScript writes them (no `with T.Kernel`): `T.match_buffer` parameters, grid and threads from
`T.thread_binding` loops or `T.launch_thread` / `T.env_thread` statements; and the per-kernel annotations upstream
scripts use with them: `T.unroll(start, stop, step=, unroll_factor=)`, `T.func_attr`, `T.annotate_min_blocks_per_sm`."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.errors import CompileError

ARCHS = ["mp_31", "mp_22"]


def compile_for(func, arch):
    return tilelang.compile(func, target=f"musa -arch={arch}")


@pytest.mark.parametrize("arch", ARCHS)
def test_thread_binding_nest_is_a_kernel_for_tile_ops(arch):
    """Nested thread_binding loops open the same kernel T.Kernel does: shared tiles, T.copy and T.Parallel work."""
    M, N, BM = 256, 64, 32

    @T.prim_func
    def main(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (M, N), dtype=T.float32, align=16)
        B = T.match_buffer(B_ptr, (M, N), dtype=T.float32)
        for bx in T.thread_binding(M // BM, thread="blockIdx.x"):
            for _tx in T.thread_binding(128, thread="threadIdx.x"):
                S = T.alloc_shared((BM, N), T.float32)
                T.copy(A[bx * BM, 0], S)
                for i, j in T.Parallel(BM, N):
                    B[bx * BM + i, j] = S[i, j] * 2.0 + T.cast(bx, "float32")

    kernel = compile_for(main, arch)
    source = kernel.get_kernel_source()
    assert "__launch_bounds__(128, 1) main_kernel(" in source
    assert "blockIdx.x" in source and "threadIdx.x" in source and "__syncthreads" in source
    a, b = rand((M, N), torch.float32, 1), poison((M, N), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a * 2 + torch.arange(M // BM).repeat_interleave(BM)[:, None].float())


@pytest.mark.parametrize("arch", ARCHS)
def test_launch_thread_statements_with_func_attr_and_min_blocks(arch):
    """`bx = T.launch_thread(...)`, `T.env_thread` + `T.launch_thread(tx, n)`, a 2-D block; T.func_attr keeps its
    attributes but not our kernel name; T.annotate_min_blocks_per_sm(2) is __launch_bounds__'s second argument."""

    @T.prim_func
    def main(A: T.Tensor((8, 32), T.float32), B: T.Tensor((8, 32), T.float32)):
        T.func_attr({"tir.noalias": True, "global_symbol": "renamed"})
        bx = T.launch_thread("blockIdx.x", 2)
        tx = T.env_thread("threadIdx.x")
        T.launch_thread(tx, 32)
        ty = T.launch_thread("threadIdx.y", 4)
        T.annotate_min_blocks_per_sm(2)
        row = bx * 4 + ty
        B[row, tx] = A[row, tx] * T.cast(T.get_thread_binding(1) + 1, "float32")

    assert bool(main.attrs["tir.noalias"]) and str(main.attrs["global_symbol"]) == "main"
    kernel = compile_for(main, arch)
    source = kernel.get_kernel_source()
    assert "__launch_bounds__(128, 2) main_kernel(" in source
    assert "blockIdx.x" in source and "threadIdx.x" in source and "threadIdx.y" in source
    a, b = rand((8, 32), torch.float32, 2), poison((8, 32), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a * (torch.arange(8) % 4 + 1)[:, None].float())


def test_dynamic_grid_from_thread_binding():
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        for bx in T.thread_binding(T.ceildiv(n, 128), thread="blockIdx.x"):
            for tx in T.thread_binding(0, 128, thread="threadIdx.x"):
                if bx * 128 + tx < n:
                    B[bx * 128 + tx] = A[bx * 128 + tx] * 3.0

    kernel = compile_for(main, "mp_31")
    a, b = rand((300,), torch.float32, 3), poison((300,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a * 3)


def test_bindings_inside_T_Kernel_name_its_axes():
    """Inside T.Kernel, thread_binding / launch_thread (statement or loop) give the kernel's own index."""

    @T.prim_func
    def main(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128):
            tx = T.thread_binding(0, 128, "threadIdx.x")
            t2 = T.launch_thread("threadIdx.x", 128)
            for t3 in T.thread_binding(128, thread="threadIdx.x"):
                B[tx] = A[t2] + T.cast(t3 - tx, "float32")

    kernel = compile_for(main, "mp_31")
    a, b = rand((128,), torch.float32, 4), poison((128,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a)


@pytest.mark.parametrize("arch", ARCHS)
def test_unroll_step_factor_and_dynamic_extent(arch):
    @T.prim_func
    def main(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (128, 16), dtype=T.float32, align=16)
        B = T.match_buffer(B_ptr, (128,), dtype=T.float32)
        for _bx in T.thread_binding(1, thread="blockIdx.x"):
            for tx in T.thread_binding(128, thread="threadIdx.x"):
                acc = T.alloc_var(T.float32, 0)
                for i in T.unroll(0, 16, step=4):  # columns 0, 4, 8, 12
                    acc += A[tx, i]
                for i in T.unroll(0, 16, unroll_factor=4):
                    acc += A[tx, i] * 10.0
                for i in T.unroll(tx % 4):  # a trip count known only at run time
                    acc += 100.0
                B[tx] = acc

    kernel = compile_for(main, arch)
    source = kernel.get_kernel_source()
    assert "#pragma unroll 4\n" in source and source.count("#pragma unroll\n") == 2
    assert "i += 4)" in source
    a, b = rand((128, 16), torch.float32, 5), poison((128,), torch.float32)
    kernel(a, b)
    expected = a[:, ::4].sum(1) + a.sum(1) * 10 + (torch.arange(128) % 4).float() * 100
    torch.testing.assert_close(b, expected, rtol=1e-5, atol=1e-4)


def test_min_blocks_per_sm_is_per_kernel():
    @T.prim_func
    def main(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as _:
            T.annotate_min_blocks_per_sm(3)
            tx = T.get_thread_binding()
            B[tx] = A[tx] + 1.0
        with T.Kernel(2, threads=64) as bx:
            tx = T.get_thread_binding()
            B[bx * 64 + tx] = B[bx * 64 + tx] * 2.0

    kernel = compile_for(main, "mp_31")
    source = kernel.get_kernel_source()
    assert "__launch_bounds__(128, 3) main_kernel(" in source
    assert "__launch_bounds__(64, 1) main_kernel_1(" in source
    a, b = rand((128,), torch.float32, 6), poison((128,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, (a + 1) * 2)


def _block_inside_thread(A: T.Tensor((128,), T.float32)):
    for tx in T.thread_binding(128, thread="threadIdx.x"):
        for _bx in T.thread_binding(4, thread="blockIdx.x"):
            A[tx] = 1.0


def _two_extents(A: T.Tensor((128,), T.float32)):
    for _bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            for _t in T.thread_binding(64, thread="threadIdx.x"):
                A[tx] = 1.0


def _extent_differs_from_kernel(A: T.Tensor((128,), T.float32)):
    with T.Kernel(1, threads=128):
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            A[tx] = 1.0


def _axis_not_in_kernel(A: T.Tensor((128,), T.float32)):
    with T.Kernel(1, threads=128):
        for ty in T.thread_binding(2, thread="threadIdx.y"):
            A[ty] = 1.0


def _statement_in_branch(A: T.Tensor((128,), T.float32)):
    _bx = T.launch_thread("blockIdx.x", 1)
    if A[0] > 0:
        tx = T.launch_thread("threadIdx.x", 128)
        A[tx] = 1.0


def _y_before_x(A: T.Tensor((128,), T.float32)):
    ty = T.launch_thread("threadIdx.y", 2)
    A[ty] = 1.0


def _kernel_inside_bindings(A: T.Tensor((128,), T.float32)):
    _bx = T.launch_thread("blockIdx.x", 1)
    with T.Kernel(1, threads=128):
        A[0] = 1.0


def _tile_op_before_bindings(A: T.Tensor((128,), T.float32)):
    S = T.alloc_shared((128,), T.float32)  # allocated in the kernel that follows (test_alloc_before_kernel.py)
    T.fill(S, 0)
    for tx in T.thread_binding(128, thread="threadIdx.x"):
        A[tx] = S[tx]


def _unroll_bad_step(A: T.Tensor((128,), T.float32)):
    with T.Kernel(1, threads=128):
        for i in T.unroll(0, 16, step=0):
            A[i] = 1.0


def _min_blocks_outside_kernel(A: T.Tensor((128,), T.float32)):
    T.annotate_min_blocks_per_sm(2)
    with T.Kernel(1, threads=128):
        A[0] = 1.0


def _func_attr_owned_key(A: T.Tensor((128,), T.float32)):
    T.func_attr({"tl.size_params": ["n"]})
    with T.Kernel(1, threads=128):
        A[0] = 1.0


@pytest.mark.parametrize("body, line, message", [
    (_block_inside_thread, "for _bx in T.thread_binding(4", "blockIdx.x is bound inside a threadIdx binding"),
    (_two_extents, "for _t in T.thread_binding(64", "threadIdx.x has extent 64 here but 128 in its first binding"),
    (_extent_differs_from_kernel, "for tx in T.thread_binding(64",
     "threadIdx.x has extent 64 here but 128 in the enclosing T.Kernel"),
    (_axis_not_in_kernel, "for ty in T.thread_binding(2", "the enclosing T.Kernel has no threadIdx.y"),
    (_statement_in_branch, 'tx = T.launch_thread("threadIdx.x"', "as a statement must be at the top of the kernel"),
    (_y_before_x, 'ty = T.launch_thread("threadIdx.y"', "threadIdx.y is bound before threadIdx.x"),
    (_kernel_inside_bindings, "with T.Kernel(1", "T.Kernel inside T.thread_binding / T.launch_thread bindings"),
    (_tile_op_before_bindings, "T.fill(S, 0)", "`T.fill` must be used inside `with T.Kernel(...)`"),
    (_unroll_bad_step, "T.unroll(0, 16, step=0)", "T.unroll: step 0 must be a positive compile-time int"),
    (_min_blocks_outside_kernel, "T.annotate_min_blocks_per_sm(2)", "`T.annotate_min_blocks_per_sm` must be used"),
    (_func_attr_owned_key, "T.func_attr(", "`tl.size_params` is set by the compiler"),
])
def test_misuse_is_a_compile_error_at_the_construct(body, line, message):
    with pytest.raises(CompileError) as err:
        T.prim_func(body)
    text = str(err.value)
    assert message in text and line in text, text


def divergent_branch_copy(transposed):
    """A branch whose condition is per-thread (a fragment element plus the thread index) copies a tile into shared
    memory and out again: straight out (each thread reads back what it wrote) or transposed (threads read elements
    others wrote)."""

    @T.prim_func
    def main(A: T.Tensor((256, 128), T.float16), B: T.Tensor((256, 256), T.float16),
             BlockMask: T.Tensor((2, 2), T.int32)):
        with T.Kernel(1, 2) as (_, by):
            A_shared = T.alloc_shared((128, 128), T.float16)
            mask = T.alloc_fragment((2,), T.int32)
            T.copy(BlockMask[by, :], mask)
            for i in T.Pipelined(2):
                a = mask[i] + T.get_thread_binding() % 2
                if a >= 0:
                    T.copy(A[a, 0], A_shared)
                    if transposed:
                        for r, c in T.Parallel(128, 128):
                            B[by * 128 + r, i * 128 + c] = A_shared[c, r]
                    else:
                        T.copy(A_shared, B[by * 128, i * 128])

    return main


def test_barrier_under_a_divergent_branch_is_a_compile_error():
    """TVM's ThreadSync cannot place the barrier such a branch needs when its threads read elements others wrote:
    a CompileError naming the branch and its loop, not TVM's InternalError. (The fragment element alone is the
    same in every thread: test_uniform_conditions.py; a branch whose threads read only what they wrote needs no
    barrier: the next test.)"""
    with pytest.raises(CompileError, match=r"`if 0 <= a:` writes and reads shared.dyn buffer `A_shared`") as err:
        compile_for(divergent_branch_copy(transposed=True), "mp_31")
    assert "for i in T.Pipelined(2)" in str(err.value)


def test_divergent_branch_whose_threads_read_what_they_wrote_needs_no_barrier():
    """Copied straight out, every thread reads back the elements it wrote itself (the two copies share a thread
    mapping), so no barrier is needed inside and the kernel runs (branch_disjointness.py proves it: a condition it
    cannot evaluate, `0 <= a` with `a` read from a fragment, counts as true)."""
    main = divergent_branch_copy(transposed=False)
    kernel = compile_for(main, "mp_31")
    body = kernel.get_kernel_source().split("if (0 <= a)")[1]
    assert "__syncthreads" not in body.split("\n  }\n")[0]
    g = torch.Generator().manual_seed(21)
    a_in = torch.randn((256, 128), generator=g).half()
    mask = torch.randint(0, 100, (2, 2), generator=g, dtype=torch.int32)
    b_out = poison((256, 256), torch.float16)
    kernel(a_in, b_out, mask)
    # thread t holds columns 8 (t % 16) .. +8 of its rows, so its row offset t % 2 is (column // 8) % 2
    rows, cols = torch.arange(128)[:, None], torch.arange(128)[None, :]
    for by in range(2):
        for i in range(2):
            src = rows + int(mask[by, i]) + (cols // 8) % 2
            want = torch.where(src < 256, a_in[src.clamp(max=255), cols.expand(128, 128)], torch.zeros((), dtype=torch.float16))
            torch.testing.assert_close(b_out[by * 128:(by + 1) * 128, i * 128:(i + 1) * 128], want, rtol=0, atol=0)
