"""Low-level names upstream scripts use through `T` (call_extern, Select, reinterpret, address_of, evaluate) and
the dtype spellings (T.dtype(...), T.float, T.half, T.int): IR as TVMScript builds it, run in the simulator."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

N = 128


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_call_extern_select_reinterpret_address_of_evaluate(arch):
    @T.prim_func
    def main(A: T.Tensor((N,), T.float), Bits: T.Tensor((N,), T.int), M: T.Tensor((N,), T.float),
             Count: T.Tensor((1,), T.int)):
        with T.Kernel(1, threads=N) as bx:
            tx = T.get_thread_binding()
            Bits[tx] = T.reinterpret("int32", A[tx])
            M[tx] = T.Select(A[tx] > 0, T.call_extern("float32", "tl::max", A[tx], 0.5), A[tx] * 2.0)
            T.evaluate(T.call_extern("int32", "tl::AtomicAdd", T.address_of(Count[0]), 1))

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    for text in ("tl::bit_cast<int>(A[", "? tl::max(A[(int)threadIdx.x], 5.000000e-01f) :", "tl::AtomicAdd(&Count[0], 1);"):
        assert text in source, text
    a = rand((N,), torch.float32, 71)
    bits, m, count = torch.zeros(N, dtype=torch.int32), poison((N,), torch.float32), torch.zeros(1, dtype=torch.int32)
    kernel(a, bits, m, count)
    assert torch.equal(bits, a.view(torch.int32))
    torch.testing.assert_close(m, torch.where(a > 0, a.clamp(min=0.5), a * 2.0))
    assert count.item() == N


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_select_call_extern_reinterpret_read_alloc_var_operands(arch):
    """A T.alloc_var operand of T.Select / T.call_extern / T.reinterpret reads its current value."""
    @T.prim_func
    def main(A: T.Tensor((N,), T.float), Out: T.Tensor((3, N), T.float), Bits: T.Tensor((N,), T.int)):
        with T.Kernel(1, threads=N) as bx:
            tx = T.get_thread_binding()
            top = T.alloc_var(T.float32, init=-T.infinity(T.float32))
            second = T.alloc_var(T.float32, init=0)
            top = A[tx]
            second = A[tx] * 3.0
            Out[0, tx] = T.Select(tx % 2 == 0, top, top + second)
            Out[1, tx] = T.Select(N == 1, top, second)  # a Python bool condition
            Out[2, tx] = T.call_extern("float32", "tl::max", top, second)
            Bits[tx] = T.reinterpret(second, T.int32)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl::max(top, second)" in source and "tl::bit_cast<int>(second)" in source, source
    a = rand((N,), torch.float32, 72)
    out, bits = poison((3, N), torch.float32), torch.zeros(N, dtype=torch.int32)
    kernel(a, out, bits)
    even = torch.arange(N) % 2 == 0
    torch.testing.assert_close(out[0], torch.where(even, a, a + a * 3.0))
    torch.testing.assert_close(out[1], a * 3.0)
    torch.testing.assert_close(out[2], torch.maximum(a, a * 3.0))
    assert torch.equal(bits, (a * 3.0).view(torch.int32))


def test_dtype_bytes():
    """`dtype.bytes`, as upstream's (tvm's itemsize): what scripts size vector widths by."""
    assert (T.bfloat16.bytes, T.float32.bytes, T.float8_e4m3fn.bytes, T.int64.bytes) == (2, 4, 1, 8)
    assert T.dtype(torch.float16).bytes == 2 and T.float32x4.bytes == 16


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_select_with_python_numbers(arch):
    """T.Select with a Python number on one side takes the other side's dtype; two numbers are float32 if either
    is a float, else int32; two expressions of different dtypes are an error at the line."""

    @T.prim_func
    def main(A: T.Tensor((N,), T.float), B: T.Tensor((N,), T.float), C: T.Tensor((N,), T.int)):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding()
            B[tx] = T.Select(tx % 3 == 1, A[tx], 2) + T.Select(A[tx] > 0, 1, 0.5)
            C[tx] = T.Select(tx < 5, 3, 4)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert ": 2.000000e+00f)" in source and "? 1.000000e+00f : 5.000000e-01f" in source, source
    a, b, c = rand((N,), torch.float32, 72), poison((N,), torch.float32), torch.full((N,), -1, dtype=torch.int32)
    kernel(a, b, c)
    t = torch.arange(N)
    torch.testing.assert_close(b, torch.where(t % 3 == 1, a, 2.0) + torch.where(a > 0, 1.0, 0.5))
    assert torch.equal(c, torch.where(t < 5, 3, 4).int())

    with pytest.raises(tilelang.CompileError) as err:
        @T.prim_func
        def mixed(A: T.Tensor((N,), T.float), C: T.Tensor((N,), T.int)):
            with T.Kernel(1, threads=N):
                tx = T.get_thread_binding()
                A[tx] = T.Select(tx < 5, A[tx], C[tx])
    assert "T.Select: the two values have different dtypes (float32 and int32)" in str(err.value)
    assert "A[tx] = T.Select(tx < 5, A[tx], C[tx])" in str(err.value)


def test_dtype_spellings_agree():
    assert T.dtype("half") == T.float16 == "float16" and T.float16 == torch.float16
    assert T.dtype(torch.bfloat16) == T.bfloat16 and T.float == "float32" and T.int == T.int32
    assert T.float16.as_torch() is torch.float16 and T.dtype("float") != T.half
    assert {T.float32: 1}["float32"] == 1 and isinstance(T.float32, T.dtype)
    with pytest.raises(tilelang.CompileError, match="unknown dtype `floaty`"):
        T.dtype("floaty")


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_handle_match_buffer_grid_thread_binding_assume(arch):
    """The TVMScript spellings of raw-TIR kernels: handle parameters bound by T.match_buffer, T.thread_binding on
    the kernel's own threads, T.grid loops, T.assume."""
    M, N = 64, 32

    @T.prim_func
    def main(a: T.handle, b: T.handle):
        A = T.match_buffer(a, (M, N), "float32")
        B = T.match_buffer(b, (M, N), "float32")
        with T.Kernel(M, threads=N) as bx:
            for tx in T.thread_binding(N, thread="threadIdx.x"):
                T.assume(bx < M)
                for i, j in T.grid(2, 3):
                    if i == 1 and j == 2:
                        B[bx, tx] = A[bx, tx] * 3

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "float* __restrict__ A, float* __restrict__ B" in source and "assume" not in source
    a, b = rand((M, N), torch.float32, 1), poison((M, N), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a * 3)

    with pytest.raises(tilelang.CompileError, match=r"T.thread_binding: threadIdx.x has extent 64 here but 32 in the enclosing T.Kernel"):
        @T.prim_func
        def wrong(A: T.Tensor((M, N), "float32")):
            with T.Kernel(M, threads=N):
                for tx in T.thread_binding(64, thread="threadIdx.x"):
                    A[0, tx] = 0


def test_T_holds_language_names_only(tmp_path):
    """In a fresh process: another test's `from tilelang.language.dtypes import ...` (an upstream import path)
    sets the submodule on the package, which would make this depend on test order."""
    import subprocess
    import sys

    for name in T.__all__:
        assert hasattr(T, name), name
    probe = ("import types, tilelang.language as T; "
             "print([n for n in dir(T) if isinstance(getattr(T, n), types.ModuleType)])")
    # run outside the checkout: `python -c` puts its cwd first on sys.path, and the source tree is not the package
    modules = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                             cwd=tmp_path).stdout.strip()
    assert modules == "[]", f"implementation modules visible through T: {modules}"
    for name in ("builder", "parser", "proxy", "UNSUPPORTED"):
        assert not hasattr(T, name)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_comm_reducer_and_tvm_thread_allreduce(arch):
    """The raw-TIR reduction of upstream's split-K GEMV: partial sums per thread, combined over threadIdx.x."""
    M, K, block_n, block_k = 64, 256, 4, 32

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(M // block_n, threads=(block_k, block_n)) as bn:
            tk = T.get_thread_binding(0)
            tn = T.get_thread_binding(1)
            acc = T.alloc_local((1,), "float32")
            reduced = T.alloc_local((1,), "float32")
            acc[0] = 0
            for k in T.serial(K // block_k):
                acc[0] += A[bn * block_n + tn, k * block_k + tk]
            with T.attr(T.comm_reducer(lambda x, y: x + y, [T.Cast("float32", 0)]), "reduce_scope",
                        T.reinterpret("handle", T.uint64(0))):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, reduced[0], tk, dtype="handle"))
            if tk == 0:
                Y[bn * block_n + tn] = reduced[0]

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "= tl::AllReduce<tl::SumOp, 32, 1," in kernel.get_kernel_source()
    a, y = rand((M, K), torch.float32, 3), poison((M,), torch.float32)
    kernel(a, y)
    torch.testing.assert_close(y, a.sum(1), rtol=1e-5, atol=1e-5)

    @T.prim_func
    def product(A: T.Tensor((32,), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=32):
            tk = T.get_thread_binding(0)
            out = T.alloc_local((1,), "float32")
            with T.attr(T.comm_reducer(lambda x, y: x * y, [T.Cast("float32", 1)]), "reduce_scope",
                        T.reinterpret("handle", T.uint64(0))):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), A[tk], True, out[0], tk, dtype="handle"))
            Y[0] = out[0]

    # a product combines too (upstream issue 2628); each combine rounds once, so the order may move the last bit
    kernel = tilelang.compile(product, target=f"musa -arch={arch}")
    assert "tl::ProdOp" in kernel.get_kernel_source()
    a = 1.0 + (rand((32,), torch.float32, 37) - 0.5) * 0.2
    y = poison((1,), torch.float32)
    kernel(a, y)
    torch.testing.assert_close(y[0], a.double().prod().float(), rtol=1e-5, atol=0)

    @T.prim_func
    def difference(A: T.Tensor((32,), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=32):
            tk = T.get_thread_binding(0)
            out = T.alloc_local((1,), "float32")
            with T.attr(T.comm_reducer(lambda x, y: x - y, [T.Cast("float32", 0)]), "reduce_scope",
                        T.reinterpret("handle", T.uint64(0))):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), A[tk], True, out[0], tk, dtype="handle"))
            Y[0] = out[0]

    with pytest.raises(tilelang.CompileError, match=r"the combiner `x - y` is not a sum, product, max, min"):
        tilelang.compile(difference, target=f"musa -arch={arch}")


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_let_binds_a_declared_variable_and_Let_an_expression(arch):
    """Upstream's alias test: `off = T.int32(); T.let(off, ko * 32)` then `A[by * 64, off]`; and `T.Let`."""
    M, K = 64, 96

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((M, K), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((M, 32), "float32")
            for ko in T.serial(K // 32):
                off = T.int32()
                T.let(off, ko * 32)
                T.copy(A[0, off], s)
                for i, j in T.Parallel(M, 32):
                    x = T.int32()
                    B[i, off + j] = s[i, j] * T.Let(x * 2 + 1, where={x: ko})

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "(ko * 32)" in src and "((ko * 2) + 1)" in src  # the bindings, substituted where they are used
    a, b = rand((M, K), torch.float32, 31), poison((M, K), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a * torch.arange(K).div(32, rounding_mode="floor").mul(2).add(1).float())


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_explicit_global_loads_and_stores(arch):
    """TileLang-MUSA's T.ldg32..256 / T.stg32..256: raw 32-bit words, reinterpreted; `pred` false loads zero bits
    and stores nothing."""
    N = 64

    @T.prim_func
    def main(X: T.Tensor((N * 8,), "float32"), Y: T.Tensor((N * 8,), "float32"), Z: T.Tensor((N * 2,), "float32")):
        with T.Kernel(N, threads=32) as pid:
            T.stg32(Y[pid * 8], T.ldg32(X[pid * 8 + 7]))
            T.stg64(Y[pid * 8 + 2:pid * 8 + 4], T.ldg64(X[pid * 8 + 4:pid * 8 + 6]), pred=pid % 2 == 0)
            T.stg128(Y[pid * 8 + 4:pid * 8 + 8], T.ldg128(X[pid * 8:pid * 8 + 4]))
            Z[pid * 2:pid * 2 + 2] = T.reinterpret(T.ldg64(X[pid * 8:pid * 8 + 2], pred=pid < N // 2), T.float32x2)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    for call in ("tl::store_global_32(", "tl::load_global_32(", "tl::store_global_64_conditional(",
                 "tl::load_global_128(", "tl::load_global_64_conditional("):
        assert call in src, call
    x = rand((N * 8,), torch.float32, 44)
    y, z = poison((N * 8,), torch.float32), poison((N * 2,), torch.float32)
    kernel(x, y, z)
    xs, ys = x.view(N, 8), y.view(N, 8)
    torch.testing.assert_close(ys[:, 0], xs[:, 7])
    torch.testing.assert_close(ys[0::2, 2:4], xs[0::2, 4:6])
    assert ys[1::2, 1:4].isnan().all() and ys[:, 1].isnan().all()
    torch.testing.assert_close(ys[:, 4:8], xs[:, 0:4])
    torch.testing.assert_close(z.view(N, 2), torch.cat([xs[:N // 2, 0:2], torch.zeros(N // 2, 2)]))
    with pytest.raises(tilelang.CompileError, match="must be 64 contiguous bits"):
        @T.prim_func
        def bad(X: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32):
                T.ldg64(X[0:4])


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_assume_removes_the_bounds_guards_it_implies(arch):
    """T.assume(cond) is a fact for the statements after it: SafeMemoryAccess leaves out the guards it implies."""

    def program(with_assume):
        N = T.dynamic("N")

        @T.prim_func
        def main(A: T.Tensor((N,), "float32"), left: T.int32, right: T.int32):
            with T.Kernel(1, threads=32):
                for i in T.serial(right - left + 1):
                    if with_assume:
                        T.assume(left + i >= 0 and left + i < N)
                    A[left + i] = 1.0

        return main

    assert "if (" in tilelang.compile(program(False), target=f"musa -arch={arch}").get_kernel_source()
    kernel = tilelang.compile(program(True), target=f"musa -arch={arch}")
    assert "if (" not in kernel.get_kernel_source()
    a = rand((64,), torch.float32, 81)
    expected = a.clone()
    expected[5:20] = 1.0
    kernel(a, 5, 19)
    torch.testing.assert_close(a, expected)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_assume_bounds_a_thread_through_expressions_the_loop_ranges_fold(arch):
    """Upstream's test_assume_complex_indexing: T.assume(i_src < M) with i_src = min(j + 233, tid + 2) proves
    tid < M (the min is tid + 2 for 32 threads), so the kernel has no guard at all; run where the assumes hold."""
    M, N = T.dynamic("M"), T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=32):
            tid = T.get_thread_binding()
            for j in T.serial(N):
                i_src = T.min(j + 233, tid + 2)
                j_src = (j * 3 + 1) % N
                T.assume(i_src >= 0 and i_src < M)
                T.assume(j_src >= 0 and j_src < N)
                B[tid, j] = A[i_src, j_src]

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "if (" not in kernel.get_kernel_source()
    a = rand((40, 24), torch.float32, 83)
    b = torch.full((40, 24), float("nan"))
    kernel(a, b)
    cols = (torch.arange(24) * 3 + 1) % 24
    torch.testing.assert_close(b[:32], a[2:34][:, cols])
    assert torch.isnan(b[32:]).all()  # rows no thread writes
