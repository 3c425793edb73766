"""Element accesses to a gemm accumulator outside T.Parallel: the accumulator keeps the gemm's layout, and each access
must provably touch an element of the accessing thread (indices derived from the thread index the way the layout
places them, as hand-written epilogues do); LowerFragmentAccess then reads that thread's own slot. An access that
cannot be shown to be the thread's own is a CompileError naming it. Also: a gemm on part of the block that does not
start at a multiple of its thread count (threads numbered from the part's first, `first` passed to the template)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.errors import CompileError

M, N, K = 64, 128, 32


def owner_rows_cols(arch, t):
    """The (row, col) pairs thread t holds of a 64 x 128 accumulator on 128 threads (the gemm's layout), as loops
    (outer count, inner count, row(r), col(c))."""
    if arch == "mp_31":  # thread i0 % 16 * 8 + i1 % 8
        return 4, 16, lambda r: r * 16 + t // 8, lambda c: c * 8 + t % 8
    # mp_22: thread i0 % 8 // 4 * 64 + i1 % 16 // 8 * 32 + i0 % 4 * 8 + i1 % 8
    return 8, 8, lambda r: r * 8 + t // 64 * 4 + t // 8 % 4, lambda c: c * 16 + t // 32 % 2 * 8 + t % 8


def epilogue_program(arch, threads=128, ws=None):
    """C = A @ B by a gemm; then each thread writes Out[row, col] = 2 * C[row, col] + 1 for the elements it holds,
    through serial loops (and a local run of 4 for mp_31's columns), never a T.Parallel."""

    @T.macro
    def body(C, Out, t):
        rows, cols, row, col = owner_rows_cols(arch, t)
        run = T.alloc_local([4], "float32")
        for r in T.unroll(rows):
            for c4 in T.unroll(cols // 4):
                for u in T.unroll(4):
                    run[u] = C[row(r), col(c4 * 4 + u)] * 2.0
                for u in T.unroll(4):
                    Out[row(r), col(c4 * 4 + u)] = run[u] + 1.0
        for r in T.unroll(rows):  # a value bound to a name, then stored: the last column group once more
            v = C[row(r), col(cols - 1)]
            Out[row(r), col(cols - 1)] = v * 2.0 + 1.0

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), Out: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads):
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            C = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            tx = T.get_thread_binding()
            if ws is None:
                T.gemm(A_s, B_s, C, clear_accum=True)
                body(C, Out, tx)
            else:
                with T.ws(ws):
                    T.gemm(A_s, B_s, C, clear_accum=True)
                    body(C, Out, tx - ws * 128)

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_gemm_accumulator_read_element_by_element_by_its_owners(arch):
    kernel = tilelang.compile(epilogue_program(arch), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    # the accumulator stays one slot per element (64 a thread), read by slot, not replicated
    assert "float C[64];" in source, source
    assert "run[u] = C[" in source or "= (C[" in source, source
    a, b = rand((M, K), torch.float16, 81), rand((K, N), torch.float16, 82)
    out = poison((M, N), torch.float32)
    kernel(a, b, out)
    torch.testing.assert_close(out, (a.float() @ b.float()) * 2 + 1, atol=1e-2, rtol=1e-2)


def test_owner_reads_in_a_ws_region_count_threads_from_its_first():
    """The gemm and its epilogue on squad 1 (threads 128..255): the owner of an element is 128 + its layout thread."""
    kernel = tilelang.compile(epilogue_program("mp_31", threads=256, ws=1), target="musa -arch=mp_31")
    a, b = rand((M, K), torch.float16, 83), rand((K, N), torch.float16, 84)
    out = poison((M, N), torch.float32)
    kernel(a, b, out)
    torch.testing.assert_close(out, (a.float() @ b.float()) * 2 + 1, atol=1e-2, rtol=1e-2)


def accumulator_read(in_condition: bool):
    """A gemm, then one element read per thread that is not provably the thread's own: as a value (row 0 of every
    column: mostly other threads' elements), or in a condition."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), Out: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            C = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C, clear_accum=True)
            tx = T.get_thread_binding()
            if in_condition:
                if C[tx // 8, tx % 8] > 0:
                    Out[tx] = 1.0
            else:
                for j in T.unroll(1):
                    Out[tx] = C[j, tx]

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_a_read_of_another_threads_element_is_an_error(arch):
    with pytest.raises(CompileError) as err:
        tilelang.compile(accumulator_read(in_condition=False), target=f"musa -arch={arch}")
    text = str(err.value)
    assert "the element access `C[j, thread_x]` outside T.Parallel (run by threads 0..127) cannot be shown to touch " \
           "an element of the accessing thread" in text, text
    assert "for j in T.unroll(1):" in text, text
    with pytest.raises(CompileError) as err:
        tilelang.compile(accumulator_read(in_condition=True), target=f"musa -arch={arch}")
    assert "an element access to `C` outside T.Parallel sits in a condition" in str(err.value)


def gemm_on_threads(first_squad, squads, threads):
    @T.prim_func
    def main(A: T.Tensor((128, 32), "float16"), B: T.Tensor((32, 64), "float16"), C: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=threads):
            A_s = T.alloc_shared((128, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_l = T.alloc_fragment((128, 64), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            with T.ws(*range(first_squad, first_squad + squads)):
                T.gemm(A_s, B_s, C_l, clear_accum=True)
                T.copy(C_l, C)

    return main


@pytest.mark.parametrize("arch,template", [("mp_31", "sqmma"), ("mp_31", "wmma"), ("mp_22", "mp22_mma")])
def test_a_gemm_on_squads_not_aligned_to_its_thread_count(arch, template):
    """A 256-thread gemm on threads 128..383: the template numbers its threads from 128 (`first` = 128)."""
    configs = {tilelang.PassConfigKey.TL_DISABLE_SQMMA: True} if template == "wmma" else None
    kernel = tilelang.compile(gemm_on_threads(1, 2, 384), target=f"musa -arch={arch}", pass_configs=configs)
    source = kernel.get_kernel_source()
    assert f"{template}" in source and ", &C_l[0], 128);" in source, source
    a, b = rand((128, 32), torch.float16, 85), rand((32, 64), torch.float16, 86)
    c = poison((128, 64), torch.float32)
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-2, rtol=1e-2)
    aligned = tilelang.compile(gemm_on_threads(2, 2, 512), target=f"musa -arch={arch}",
                               pass_configs=configs).get_kernel_source()
    assert ", &C_l[0]);" in aligned  # threads 256..511 start at a multiple of 256: numbered tid % 256


def test_a_gemm_must_start_at_a_multiple_of_its_instruction_group():
    @T.prim_func
    def main(A: T.Tensor((128, 32), "float16"), B: T.Tensor((32, 64), "float16"), C: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=256):
            A_s = T.alloc_shared((128, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_l = T.alloc_fragment((128, 64), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            tx = T.get_thread_binding()
            if tx >= 64 and tx < 192:
                T.gemm(A_s, B_s, C_l, clear_accum=True)
                T.copy(C_l, C)

    with pytest.raises(CompileError) as err:
        tilelang.compile(main, target="musa -arch=mp_22")
    text = str(err.value)
    assert "T.gemm on threads 64..191: a gemm run by part of the block must start at a multiple of 128 threads" in text
    assert "T.gemm(A_s, B_s, C_l, clear_accum=True)" in text, text
