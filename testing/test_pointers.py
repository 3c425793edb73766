"""Raw pointers as upstream TileLang scripts write them: `T.ptr` parameters viewed with `T.make_tensor` (the
launcher takes a tensor or an int address), pointer tables `T.Tensor([G], T.ptr)` (int64 addresses the kernel
loads, then reads through), and `T.alloc_global` workspaces the launcher allocates (poisoned on the simulator)."""

import math

import pytest
import tilelang.language as T
import torch
from conftest import poison, rand

import tilelang
from tilelang_musa.errors import CompileError

ARCHS = ["mp_31", "mp_22"]


def target(arch):
    return f"musa -arch={arch}"


def ptr_matmul(block_M, block_N, block_K, dtype=T.float16, accum_dtype=T.float32):
    """Upstream's test_tilelang_language_ptr.py matmul (B is (n, k): it is read transposed)."""

    @T.prim_func
    def main(a_ptr: T.ptr, b_ptr: T.ptr, c_ptr: T.ptr, m: T.int32, n: T.int32, k: T.int32):
        A = T.make_tensor(a_ptr, (m, k), dtype)
        B = T.make_tensor(b_ptr, (n, k), dtype)
        C = T.make_tensor(c_ptr, (m, n), accum_dtype)
        with T.Kernel(T.ceildiv(n, block_N), T.ceildiv(m, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(k, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_ptr_matmul_takes_tensors_or_addresses_and_guards_odd_sizes(arch):
    M, N, K = 70, 50, 40  # not multiples of the blocks: the views' bounds guards use m, n, k
    program = ptr_matmul(32, 32, 32)
    cython = tilelang.compile(program, target=target(arch), execution_backend="cython")
    ffi = tilelang.compile(program, target=target(arch), execution_backend="tvm_ffi")  # the same launcher here
    source = cython.get_kernel_source()
    assert "void* __restrict__ a_ptr" in source and "reinterpret_cast<half_t*>(a_ptr)" in source
    assert "reinterpret_cast<float*>(c_ptr)" in source
    assert "< m)" in source and "< k)" in source  # guards against the view's shape
    assert [p.kind for p in cython.params] == ["pointer"] * 3 + ["scalar"] * 3
    a, b = rand((M, K), torch.float16, seed=1), rand((N, K), torch.float16, seed=2)
    ref = a.float() @ b.float().T
    c_ffi, c_cython = poison((M, N), torch.float32), poison((M, N), torch.float32)
    ffi(a, b, c_ffi, M, N, K)  # tensors: their data pointers
    cython(a.data_ptr(), b.data_ptr(), c_cython.data_ptr(), M, N, K)  # plain int addresses
    torch.testing.assert_close(c_ffi, ref, atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(c_cython, c_ffi)


def eager_ptr_scale(X: T.ptr, Y: T.ptr, n: int, dtype: T.dtype, factor: float = 2.0, threads: int = 64):
    """Upstream's eager pointer form: `X: T.ptr` parameters viewed with T.make_tensor, sizes as Python ints."""
    X = T.make_tensor(X, (n,), dtype)
    Y = T.make_tensor(Y, (n,), dtype)
    with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx:
        for i in T.Parallel(threads):
            Y[bx * threads + i] = X[bx * threads + i] * factor


@pytest.mark.parametrize("arch", ARCHS)
def test_eager_ptr_parameters_compile_from_ptr_specs_and_take_tensors(arch):
    """`f.compile(X=T.ptr(), ...)` (what upstream's par_compile specs pass) declares pointer parameters; the kernel
    then takes tensors (or addresses) for them."""
    kernel = tilelang.jit(target=target(arch))(eager_ptr_scale).compile(X=T.ptr(), Y=T.ptr(), n=200, dtype=T.float32)
    source = kernel.get_kernel_source()
    assert "void* __restrict__ X" in source and "reinterpret_cast<float*>(Y)" in source, source
    assert [p.kind for p in kernel.params] == ["pointer", "pointer"]
    x, y = rand((200,), torch.float32, seed=3), poison((200,), torch.float32)
    kernel(x, y)
    torch.testing.assert_close(y, x * 2.0)


def pointer_table_copy(G, N, dtype=T.float16):
    @T.prim_func
    def main(src_ptrs: T.Tensor([G], T.ptr), out: T.Tensor([G, N], dtype)):
        with T.Kernel(G, threads=1) as bx:
            Src = T.make_tensor(src_ptrs[bx], (N,), dtype)
            for i in T.serial(N):
                out[bx, i] = Src[i]

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_pointer_table_copy_loads_each_address_then_reads_through_it(arch):
    G, N = 3, 40
    program = pointer_table_copy(G, N)
    params = program.params
    assert str(params[0].ty.dtype.dtype) == "int64" and [int(d) for d in params[0].ty.shape] == [G]
    kernel = tilelang.compile(program, target=target(arch))
    source = kernel.get_kernel_source()
    assert "int64_t* __restrict__ src_ptrs" in source
    assert "half_t* Src_ptr = reinterpret_cast<half_t*>(src_ptrs[(int)blockIdx.x]);" in source
    srcs = [rand((N,), torch.float16, seed=s) for s in range(G)]
    table = torch.tensor([s.data_ptr() for s in srcs], dtype=torch.int64)
    out = poison((G, N), torch.float16)
    kernel(table, out)
    torch.testing.assert_close(out, torch.stack(srcs))


def grouped_matmul(batch_sizes, N, K, block_M, block_N, block_K, dtype=T.float16, accum_dtype=T.float32):
    """Upstream's pointer-table grouped GEMM: each block finds its group, then views that group's A, B, C."""
    G, max_M = len(batch_sizes), max(batch_sizes)
    total_m_blocks = sum(math.ceil(size / block_M) for size in batch_sizes)

    @T.prim_func
    def main(a_ptrs: T.Tensor([G], T.ptr), b_ptrs: T.Tensor([G], T.ptr), c_ptrs: T.Tensor([G], T.ptr),
             batch_tile_offsets: T.Tensor([G], T.int32)):
        with T.Kernel(total_m_blocks, T.ceildiv(N, block_N), threads=32) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            cur_batch_idx = T.alloc_var(dtype=T.int32)
            cur_tile_offset = T.alloc_var(dtype=T.int32)
            cur_batch_idx = 0
            cur_tile_offset = 0
            for i in range(G):
                in_cur_batch_idx = bx >= batch_tile_offsets[i]
                cur_batch_idx = T.if_then_else(in_cur_batch_idx, i, cur_batch_idx)
                cur_tile_offset = T.if_then_else(in_cur_batch_idx, batch_tile_offsets[i], cur_tile_offset)
            m_start = (bx - cur_tile_offset) * block_M
            A = T.make_tensor(a_ptrs[cur_batch_idx], (max_M, K), dtype)
            B = T.make_tensor(b_ptrs[cur_batch_idx], (K, N), dtype)
            C = T.make_tensor(c_ptrs[cur_batch_idx], (max_M, N), dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=1):
                T.copy(A[m_start, ko * block_K], A_shared)
                T.copy(B[ko * block_K, by * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[m_start, by * block_N])

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_pointer_table_grouped_matmul(arch):
    sizes, N, K, bm, bn, bk = [8, 12, 17], 32, 32, 16, 16, 16
    kernel = tilelang.compile(grouped_matmul(sizes, N, K, bm, bn, bk), target=target(arch))
    source = kernel.get_kernel_source()
    for name in ("A", "B", "C"):  # the table load itself is bounds-guarded: cur_batch_idx is not provably < G
        assert f"half_t* {name}_ptr = reinterpret_cast<half_t*>(" in source
        assert f"{name.lower()}_ptrs[cur_batch_idx]" in source
    offsets = [0]
    for size in sizes[:-1]:
        offsets.append(offsets[-1] + math.ceil(size / bm))
    a_exact = [rand((s, K), torch.float16, seed=s) for s in sizes]
    bs = [rand((K, N), torch.float16, seed=100 + s) for s in sizes]
    a_bufs = [torch.zeros(max(sizes), K, dtype=torch.float16) for _ in sizes]
    for buf, a in zip(a_bufs, a_exact):
        buf[: a.shape[0]].copy_(a)
    c_bufs = [poison((max(sizes), N), torch.float16) for _ in sizes]
    table = [torch.tensor([t.data_ptr() for t in ts], dtype=torch.int64) for ts in (a_bufs, bs, c_bufs)]
    kernel(*table, torch.tensor(offsets, dtype=torch.int32))
    for c, a, b, size in zip(c_bufs, a_exact, bs, sizes):
        torch.testing.assert_close(c[:size].float(), a.float() @ b.float(), atol=1e-2, rtol=1e-2)


def alloc_global_copy(N, block_N, dtype, read_first=False):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
        C = T.alloc_global((N,), dtype)
        with T.Kernel(T.ceildiv(N, block_N), threads=block_N) as bx:
            if not read_first:
                T.copy(A[bx * block_N:(bx + 1) * block_N], C[bx * block_N:(bx + 1) * block_N])
            T.copy(C[bx * block_N:(bx + 1) * block_N], B[bx * block_N:(bx + 1) * block_N])

    return main


@pytest.mark.parametrize("arch", ARCHS)
def test_alloc_global_is_a_hidden_workspace_the_launcher_allocates(arch):
    N = 1000
    kernel = tilelang.compile(alloc_global_copy(N, 128, T.float16), out_idx=[1], target=target(arch))
    assert "half_t* __restrict__ C" in kernel.get_kernel_source()
    assert [(p.name, p.is_output, p.is_workspace) for p in kernel.params] == [
        ("A", False, False), ("B", True, False), ("C", False, True)]
    a = rand((N,), torch.float16)
    torch.testing.assert_close(kernel(a), a)  # the caller passes A only, gets B back
    with pytest.raises(TypeError, match=r"takes 1 argument\(s\) \(A\), got 2"):
        kernel(a, a)


def test_alloc_global_read_before_write_reads_poison():
    kernel = tilelang.compile(alloc_global_copy(256, 128, T.float32, read_first=True), out_idx=-1,
                              target=target("mp_31"))
    assert kernel.params[-2].is_output and kernel.params[-1].is_workspace  # out_idx=-1 counts the user's params
    assert torch.isnan(kernel(rand((256,), torch.float32))).all()


def test_alloc_global_inside_the_kernel_is_an_error():
    with pytest.raises(CompileError, match=r"T.alloc_global must be used before `with T.Kernel"):
        @T.prim_func
        def main(A: T.Tensor((16,), T.float32)):
            with T.Kernel(1, threads=16):
                T.alloc_global((16,), T.float32)


def test_ptr_param_rejects_what_is_not_a_tensor_or_an_address():
    kernel = tilelang.compile(ptr_matmul(32, 32, 32), target=target("mp_31"))
    c = torch.zeros(32, 32)
    with pytest.raises(TypeError, match=r"pointer parameter a_ptr: T.ptr expects a torch.Tensor \(its data pointer\) "
                                        r"or an int address; got str"):
        kernel("a", c, c, 32, 32, 32)
    with pytest.raises(TypeError, match=r"got float"):
        kernel(1.5, c, c, 32, 32, 32)
    with pytest.raises(ValueError, match=r"pointer parameter a_ptr is null \(address 0\)"):
        kernel(0, c, c, 32, 32, 32)


def test_make_tensor_of_a_non_pointer_is_an_error():
    with pytest.raises(CompileError, match=r"T.make_tensor takes a pointer: .*; got a int32 value `n`"):
        @T.prim_func
        def main(n: T.int32, out: T.Tensor((16,), T.float32)):
            with T.Kernel(1, threads=16):
                T.make_tensor(n, (16,), T.float32)
    with pytest.raises(CompileError, match=r"got the tensor `A`"):
        @T.prim_func
        def main2(A: T.Tensor((16,), T.int64), out: T.Tensor((16,), T.float32)):
            with T.Kernel(1, threads=16):
                T.make_tensor(A, (16,), T.float32)
