"""T.gemm_sp (upstream's 2:4 structured-sparse GEMM) and tilelang.utils.sparse. MUSA has no sparse matrix
instruction this compiler models: the block expands its A tile into a dense shared tile from the metadata and
runs T.gemm on it (SQMMA on mp_31, warp MMA on mp_22), so the result is the dense product of the decompressed A."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison
from tilelang.utils.sparse import compress, get_e_factor, randint_semi_sparse, randn_semi_sparse

GEMM_CALL = {"mp_31": "tl::gemm_ss_mp31_sqmma", "mp_22": "tl::gemm_ss_mp22_mma"}


def decompress_reference(a_sparse, e, k):
    """A from its kept elements and metadata, read as the layout says (independently of compress)."""
    m = a_sparse.shape[0]
    factor = k // e.shape[1]
    dense = torch.zeros((m, k), dtype=a_sparse.dtype)
    for row in range(m):
        for col in range(k):
            chunk = (int(e[row, col // factor]) >> (col % factor // 4 * 4)) & 15
            group = col // 4
            if col % 4 == chunk & 3:
                dense[row, col] = a_sparse[row, 2 * group]
            elif col % 4 == chunk >> 2:
                dense[row, col] = a_sparse[row, 2 * group + 1]
    return dense


def test_compress_layout():
    a = torch.tensor([[0, 3, 0, 5, 0, 0, 0, 7, 1, 2, 0, 0, 0, 0, 0, 0]], dtype=torch.float16)
    a_sparse, e = compress(a)
    assert e.dtype == torch.int16 and e.shape == (1, 1)
    assert a_sparse.tolist() == [[3, 5, 0, 7, 1, 2, 0, 0]]
    # groups: positions (1, 3) -> 0b1101, (0, 3) -> 0b1100 (a zero fills the first kept slot), (0, 1), (0, 1)
    assert int(e[0, 0]) & 0xFFFF == 0b0100_0100_1100_1101


@pytest.mark.parametrize("meta_dtype", [torch.int8, torch.int16, torch.int32])
def test_compress_round_trip(meta_dtype):
    a = randn_semi_sparse(8, 64, dtype=torch.bfloat16)
    assert ((a.reshape(8, 16, 4) != 0).sum(-1) <= 2).all()
    a_sparse, e = compress(a, meta_dtype=meta_dtype)
    assert e.shape == (8, 64 // get_e_factor(T.bfloat16, meta_dtype))
    assert torch.equal(decompress_reference(a_sparse, e, 64), a)
    ints = randint_semi_sparse(4, 32, -5, 6, dtype=torch.int8)
    ints_sparse, ints_e = compress(ints)
    assert ints_e.dtype == torch.int32 and torch.equal(decompress_reference(ints_sparse, ints_e, 32), ints)


def test_compress_rejects_a_dense_group():
    a = torch.zeros((2, 16), dtype=torch.float16)
    a[1, 4:7] = 1
    with pytest.raises(ValueError, match="not 2:4 sparse: row 1, elements 4..7 hold 3 nonzeros"):
        compress(a)


def sparse_gemm(M, N, K, block_M, block_N, block_K, dtype, e_dtype, trans_B=False, stages=2):
    e_factor = get_e_factor(dtype, e_dtype)
    b_shape, b_tile = ((N, K), (block_N, block_K)) if trans_B else ((K, N), (block_K, block_N))

    @T.prim_func
    def main(A_sparse: T.Tensor((M, K // 2), dtype), E: T.Tensor((M, K // e_factor), e_dtype),
             B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K // 2), dtype)
            E_shared = T.alloc_shared((block_M, block_K // e_factor), e_dtype)
            B_shared = T.alloc_shared(b_tile, dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.copy(A_sparse[by * block_M, k * block_K // 2], A_shared)
                T.copy(E[by * block_M, k * block_K // e_factor], E_shared)
                if trans_B:
                    T.copy(B[bx * block_N, k * block_K], B_shared)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm_sp(A_shared, E_shared, B_shared, C_local, transpose_B=trans_B)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@pytest.mark.parametrize("arch, dtype, e_dtype, trans_B", [
    ("mp_31", "float16", "int16", False),
    ("mp_31", "bfloat16", "int8", True),
    ("mp_22", "float16", "int32", True),
    ("mp_22", "bfloat16", "int16", False),
])
def test_gemm_sp_matches_the_dense_product(arch, dtype, e_dtype, trans_B):
    M, N, K = 128, 128, 256
    kernel = tilelang.compile(sparse_gemm(M, N, K, 64, 64, 64, dtype, e_dtype, trans_B), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    assert "A_shared_dense" in src  # the dense tile the metadata expands A into
    assert GEMM_CALL[arch] in src and f"&A_shared_dense[0], &B_shared[" in src
    torch_dtype = getattr(torch, dtype)
    a = randn_semi_sparse(M, K, dtype=torch_dtype)
    b = torch.randn((N, K) if trans_B else (K, N)).to(torch_dtype)
    a_sparse, e = compress(a, meta_dtype=getattr(torch, e_dtype))
    c = poison((M, N), torch.float32)
    kernel(a_sparse, e, b, c)
    ref = a.float() @ (b.float().t() if trans_B else b.float())
    torch.testing.assert_close(c, ref, rtol=1e-3, atol=1e-3)


def test_gemm_sp_errors_name_the_construct_and_line():
    with pytest.raises(tilelang.UnsupportedError, match="T.gemm_sp: transpose_A") as info:
        @T.prim_func
        def transposed(A: T.Tensor((64, 32), "float16"), E: T.Tensor((64, 4), "int16"),
                       B: T.Tensor((64, 64), "float16")):
            with T.Kernel(1, threads=128):
                A_s = T.alloc_shared((64, 32), "float16")
                E_s = T.alloc_shared((64, 4), "int16")
                C_l = T.alloc_fragment((64, 64), "float32")
                T.gemm_sp(A_s, E_s, B, C_l, transpose_A=True)

    assert "test_gemm_sp.py" in str(info.value)
    with pytest.raises(tilelang.CompileError, match=r"E must be \(64, 64 // 16\) of int16.*got E E_s \[64, 8\]"):
        @T.prim_func
        def wrong_metadata(A: T.Tensor((64, 32), "float16")):
            with T.Kernel(1, threads=128):
                A_s = T.alloc_shared((64, 32), "float16")
                E_s = T.alloc_shared((64, 8), "int16")
                B_s = T.alloc_shared((64, 64), "float16")
                C_l = T.alloc_fragment((64, 64), "float32")
                T.gemm_sp(A_s, E_s, B_s, C_l)
    with pytest.raises(tilelang.CompileError, match="A_sparse must be a whole 2-D shared tile"):
        @T.prim_func
        def fragment_a(A: T.Tensor((64, 32), "float16")):
            with T.Kernel(1, threads=128):
                A_f = T.alloc_fragment((64, 32), "float16")
                E_s = T.alloc_shared((64, 4), "int16")
                B_s = T.alloc_shared((64, 64), "float16")
                C_l = T.alloc_fragment((64, 64), "float32")
                T.gemm_sp(A_f, E_s, B_s, C_l)


@pytest.mark.parametrize("arch, dtype", [("mp_22", "int8"), ("mp_31", "float8_e4m3fn")])
def test_gemm_sp_8bit(arch, dtype):
    M, N, K = 64, 64, 128
    accum = "int32" if dtype == "int8" else "float32"
    e_factor = get_e_factor(dtype, "int32")

    @T.prim_func
    def main(A_sparse: T.Tensor((M, K // 2), dtype), E: T.Tensor((M, K // e_factor), "int32"),
             B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(1, threads=128):
            A_shared = T.alloc_shared((M, K // 2), dtype)
            E_shared = T.alloc_shared((M, K // e_factor), "int32")
            B_shared = T.alloc_shared((K, N), dtype)
            C_local = T.alloc_fragment((M, N), accum)
            T.copy(A_sparse, A_shared)
            T.copy(E, E_shared)
            T.copy(B, B_shared)
            T.gemm_sp(A_shared, E_shared, B_shared, C_local, clear_accum=True)
            T.copy(C_local, C)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "A_shared_dense" in kernel.get_kernel_source()
    torch_dtype = getattr(torch, dtype)
    if dtype == "int8":
        a = randint_semi_sparse(M, K, -8, 8, dtype=torch_dtype)
        b = torch.randint(-8, 8, (K, N)).to(torch_dtype)
        c, ref = torch.full((M, N), -12345, dtype=torch.int32), a.int() @ b.int()
    else:
        a = randn_semi_sparse(M, K, dtype=torch_dtype)
        b = torch.randn(K, N).to(torch_dtype)
        c, ref = poison((M, N), torch.float32), a.float() @ b.float()
    a_sparse, e = compress(a)
    assert e.dtype == (torch.int32 if dtype == "int8" else torch.int16)
    if e.dtype != torch.int32:
        a_sparse, e = compress(a, meta_dtype=torch.int32)
    kernel(a_sparse, e, b, c)
    torch.testing.assert_close(c, ref, rtol=1e-3, atol=1e-3)
