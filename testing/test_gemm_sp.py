"""T.gemm_sp (upstream's 2:4 structured-sparse GEMM) and tilelang.utils.sparse. MUSA has no sparse matrix
instruction this compiler models: the block expands its A tile into a dense shared tile from the metadata and
runs T.gemm on it (SQMMA on mp_31, warp MMA on mp_22), so the result is the dense product of the decompressed A."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import line_of, poison
from tilelang.utils.sparse import compress, get_e_factor, randint_semi_sparse, randn_semi_sparse

GEMM_CALL = {"mp_31": "tl::gemm_ss_mp31_sqmma", "mp_22": "tl::gemm_ss_mp22_mma"}


def decompress_reference(a_sparse, e, k):
    """A from its kept elements and metadata, read as the format says (independently of compress): per group
    (4 elements, 2 kept; 2 elements, 1 kept for float32) a 4-bit chunk of two 2-bit positions in 16-bit units."""
    m = a_sparse.shape[0]
    factor = k // e.shape[1]
    group = 2 if a_sparse.dtype == torch.float32 else 4
    kept = group // 2
    dense = torch.zeros((m, k), dtype=a_sparse.dtype)
    for row in range(m):
        for col in range(k):
            chunk = (int(e[row, col // factor]) >> (col % factor // group * 4)) & 15
            positions = [(chunk & 3) * group // 4, (chunk >> 2) * group // 4][:kept]
            if col % group in positions:
                dense[row, col] = a_sparse[row, col // group * kept + positions.index(col % group)]
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
    def transposed(A: T.Tensor((64, 32), "float16"), E: T.Tensor((64, 4), "int16"),
                   B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((32, 64), "float16")
            E_s = T.alloc_shared((64, 4), "int16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.gemm_sp(A_s, E_s, B, C_l, transpose_A=True, transpose_E=True)

    with pytest.raises(tilelang.CompileError, match=r"A_sparse A_s is \(32, 64\), so A is \(64, 64\) and E must be "
                       r"\(64 // 16, 64\) of int16 \(get_e_factor; transpose_E=True\); got E E_s \[64, 4\]") as info:
        T.prim_func(transposed)
    assert f"test_gemm_sp.py:{line_of(transposed, 'T.gemm_sp(')}" in str(info.value)
    with pytest.raises(tilelang.CompileError, match=r"E must be \(64, 64 // 16\) of int16.*got E E_s \[64, 8\]"):
        @T.prim_func
        def wrong_metadata(A: T.Tensor((64, 32), "float16")):
            with T.Kernel(1, threads=128):
                A_s = T.alloc_shared((64, 32), "float16")
                E_s = T.alloc_shared((64, 8), "int16")
                B_s = T.alloc_shared((64, 64), "float16")
                C_l = T.alloc_fragment((64, 64), "float32")
                T.gemm_sp(A_s, E_s, B_s, C_l)
    with pytest.raises(tilelang.CompileError, match="A_sparse must be a whole 2-D tile of constant shape in shared "
                       "memory or a fragment; got A \\(global"):
        @T.prim_func
        def global_a(A: T.Tensor((64, 32), "float16")):
            with T.Kernel(1, threads=128):
                E_s = T.alloc_shared((64, 4), "int16")
                B_s = T.alloc_shared((64, 64), "float16")
                C_l = T.alloc_fragment((64, 64), "float32")
                T.gemm_sp(A, E_s, B_s, C_l)
    with pytest.raises(tilelang.UnsupportedError, match="T.gemm_sp: A of dtype float64 is not supported"):
        @T.prim_func
        def double_a(A: T.Tensor((64, 32), "float64")):
            with T.Kernel(1, threads=128):
                A_s = T.alloc_shared((64, 32), "float64")
                E_s = T.alloc_shared((64, 8), "int16")
                B_s = T.alloc_shared((64, 64), "float64")
                C_l = T.alloc_fragment((64, 64), "float64")
                T.gemm_sp(A_s, E_s, B_s, C_l)


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


def operand_program(M, N, K, block_K, dtype, e_dtype, a_in, b_in, trans_A, trans_E, trans_B, e_in="shared"):
    """One block: A_sparse / E / B tiles loaded per K step, A_sparse and B optionally moved into fragments, E
    loaded into shared memory or a fragment."""
    f = get_e_factor(dtype, e_dtype)
    alloc_e = T.alloc_fragment if e_in == "fragment" else T.alloc_shared
    a_tile = (block_K // 2, M) if trans_A else (M, block_K // 2)
    e_tile = (block_K // f, M) if trans_E else (M, block_K // f)
    b_shape, b_tile = ((N, K), (N, block_K)) if trans_B else ((K, N), (block_K, N))

    @T.prim_func
    def main(A_sparse: T.Tensor((K // 2, M) if trans_A else (M, K // 2), dtype),
             E: T.Tensor((K // f, M) if trans_E else (M, K // f), e_dtype), B: T.Tensor(b_shape, dtype),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            A_shared = T.alloc_shared(a_tile, dtype)
            E_tile = alloc_e(e_tile, e_dtype)
            B_shared = T.alloc_shared(b_tile, dtype)
            A_frag = T.alloc_fragment(a_tile, dtype)
            B_frag = T.alloc_fragment(b_tile, dtype)
            C_local = T.alloc_fragment((M, N), "float32")
            T.clear(C_local)
            for k in T.Pipelined(K // block_K, num_stages=2):
                if trans_A:
                    T.copy(A_sparse[k * block_K // 2, 0], A_shared)
                else:
                    T.copy(A_sparse[0, k * block_K // 2], A_shared)
                if trans_E:
                    T.copy(E[k * block_K // f, 0], E_tile)
                else:
                    T.copy(E[0, k * block_K // f], E_tile)
                if trans_B:
                    T.copy(B[0, k * block_K], B_shared)
                else:
                    T.copy(B[k * block_K, 0], B_shared)
                if a_in == "fragment":
                    T.copy(A_shared, A_frag)
                    if b_in == "fragment":
                        T.copy(B_shared, B_frag)
                        T.gemm_sp(A_frag, E_tile, B_frag, C_local, trans_A, trans_E, trans_B)
                    else:
                        T.gemm_sp(A_frag, E_tile, B_shared, C_local, trans_A, trans_E, trans_B)
                elif b_in == "fragment":
                    T.copy(B_shared, B_frag)
                    T.gemm_sp(A_shared, E_tile, B_frag, C_local, trans_A, trans_E, trans_B)
                else:
                    T.gemm_sp(A_shared, E_tile, B_shared, C_local, trans_A, trans_E, trans_B)
            T.copy(C_local, C)

    return main


def run_operand_program(arch, M, N, K, block_K, dtype, e_dtype, a_in, b_in, trans_A, trans_E, trans_B, tol=1e-3,
                        e_in="shared"):
    program = operand_program(M, N, K, block_K, dtype, e_dtype, a_in, b_in, trans_A, trans_E, trans_B, e_in)
    kernel = tilelang.compile(program, target=f"musa -arch={arch}")
    torch_dtype = getattr(torch, dtype)
    a = randn_semi_sparse(M, K, dtype=torch_dtype)
    b = torch.randn((N, K) if trans_B else (K, N)).to(torch_dtype)
    a_sparse, e = compress(a, meta_dtype=getattr(torch, e_dtype))
    if trans_A:
        a_sparse = a_sparse.t().contiguous()
    if trans_E:
        e = e.t().contiguous()
    c = poison((M, N), torch.float32)
    kernel(a_sparse, e, b, c)
    torch.testing.assert_close(c, a.float() @ (b.float().t() if trans_B else b.float()), rtol=tol, atol=tol)
    return kernel.get_kernel_source()


@pytest.mark.parametrize("arch, dtype, a_in, b_in, e_in, trans_A, trans_E, trans_B", [
    ("mp_31", "float16", "fragment", "shared", "shared", False, False, True),  # Moore Threads' test_gemm_rs
    ("mp_22", "bfloat16", "fragment", "fragment", "fragment", False, False, False),  # test_gemm_rr, E in a fragment
    ("mp_31", "float16", "shared", "fragment", "shared", True, True, False),  # test_gemm_sr, A given K-major
    ("mp_22", "float16", "shared", "shared", "shared", True, True, True),
    ("mp_31", "bfloat16", "fragment", "shared", "fragment", True, False, False),  # A K-major, E as compress wrote it
    ("mp_22", "float16", "shared", "shared", "shared", False, True, False),  # E transposed only
])
def test_gemm_sp_fragment_operands_and_k_major_a(arch, dtype, a_in, b_in, e_in, trans_A, trans_E, trans_B):
    src = run_operand_program(arch, 64, 64, 64, 32, dtype, "int16", a_in, b_in, trans_A, trans_E, trans_B,
                              e_in=e_in)
    a_name = "A_frag" if a_in == "fragment" else "A_shared"
    if a_in == "fragment":  # staged to shared, where every thread can read the elements its dense ones come from
        assert f"{dtype_c(dtype)}* A_frag_staged = " in src
    assert ("short* E_tile_staged = " in src) == (e_in == "fragment")
    # The dense tile keeps A's orientation: T.gemm's own transpose_A.
    flags = f"{str(trans_A).lower()}, {str(trans_B).lower()}"
    call = re.search(rf"tl::gemm_s[sr]_{arch.replace('_', '')}_\w+<\d+, \d+, \d+, \d+, \d+, {flags}, false\b.*?"
                     rf"\(&{a_name}_dense\[0\], ", src)
    assert call, src


def dtype_c(dtype):
    return {"float16": "half_t", "bfloat16": "bfloat16_t", "float32": "float"}[dtype]


def test_compress_float32_layout():
    a = torch.tensor([[0, 3, 5, 0, 0, 0, 7, 0]], dtype=torch.float32)
    a_sparse, e = compress(a)
    assert e.dtype == torch.int16 and e.shape == (1, 1) and get_e_factor(T.float32, T.int16) == 8
    assert a_sparse.tolist() == [[3, 5, 0, 7]]
    # groups of 2, one kept: element 1 -> positions (2, 3) of 16 bits = 0b1110; element 0 (or none) -> 0b0100
    assert int(e[0, 0]) & 0xFFFF == 0b0100_0100_0100_1110
    a8 = randn_semi_sparse(8, 64, dtype=torch.float32)
    assert ((a8.reshape(8, 32, 2) != 0).sum(-1) <= 1).all()
    for meta_dtype in (torch.int8, torch.int16, torch.int32):
        a_sparse, e = compress(a8, meta_dtype=meta_dtype)
        assert a_sparse.shape == (8, 32) and torch.equal(decompress_reference(a_sparse, e, 64), a8)
    crowded = torch.zeros((2, 8))
    crowded[1, 2:4] = 1
    with pytest.raises(ValueError, match="not 1:2 sparse: row 1, elements 2..3 hold 2 nonzeros"):
        compress(crowded)


@pytest.mark.parametrize("arch, a_in, trans_A", [("mp_31", "shared", False), ("mp_22", "fragment", True)])
def test_gemm_sp_float32(arch, a_in, trans_A):
    # float32 A is 1:2 sparse (tf32's 2:4 of 16-bit halves); T.gemm takes the float32 product as for a dense A
    src = run_operand_program(arch, 64, 64, 64, 32, "float32", "int8", a_in, "shared", trans_A, trans_A, False,
                              tol=1e-2)
    assert "float* A_" in src and "_dense = " in src


def test_upstream_import_paths():
    from tilelang.cuda.intrinsics.sparse_layout import GROUP_CONFIG, get_e_factor as upstream_e_factor
    from tilelang.cuda.intrinsics.sparse_layout import get_e_replicate_factor
    from tilelang.language.dtypes import _TORCH_DTYPE_TO_STR, dtype

    assert _TORCH_DTYPE_TO_STR[torch.half] == "float16" and _TORCH_DTYPE_TO_STR[torch.float8_e4m3fn] == "float8_e4m3fn"
    assert dtype(_TORCH_DTYPE_TO_STR[torch.bfloat16]) == T.bfloat16
    assert GROUP_CONFIG[T.float] == (1, 2) and GROUP_CONFIG[dtype("float8_e4m3")] == (2, 4)
    assert upstream_e_factor(T.float16, T.int8) == 8 and upstream_e_factor(T.float32, T.int32) == 16
    assert get_e_replicate_factor(T.int8) == 1 and get_e_replicate_factor(T.float16) == 2


@pytest.mark.parametrize("arch, dtype", [("mp_31", "float16"), ("mp_22", "int8"), ("mp_22", "float32")])
def test_gemm_sp_reads_cutlass_sm8x_metadata_through_its_layout(arch, dtype):
    """torch's CUTLASS compressor (what to_sparse_semi_structured runs) writes the same metadata integers in
    CUTLASS's interleaved order: annotated with make_cutlass_metadata_layout(arch="8.0"), as upstream's scripts do,
    T.gemm_sp reads them right (the tile's annotation is optional: copies are logical)."""
    from torch.sparse._semi_structured_conversions import sparse_semi_structured_from_dense_cutlass

    from tilelang.layout import make_cutlass_metadata_layout

    M, N, K, block_K = 64, 32, 128, 64
    torch_dtype = getattr(torch, dtype)
    a = randint_semi_sparse(M, K, -4, 4, dtype=torch_dtype) if dtype == "int8" else randn_semi_sparse(M, K, torch_dtype)
    b = torch.randint(-4, 4, (K, N)).to(torch_dtype) if dtype == "int8" else torch.randn(K, N).to(torch_dtype)
    a_sparse, e = sparse_semi_structured_from_dense_cutlass(a)
    e_dtype, f = str(e.dtype).removeprefix("torch."), K // e.shape[1]
    accum = "int32" if dtype == "int8" else "float32"

    @T.prim_func
    def main(A_sparse: T.Tensor((M, K // 2), dtype), E: T.Tensor((M, K // f), e_dtype), B: T.Tensor((K, N), dtype),
             C: T.Tensor((M, N), accum)):
        with T.Kernel(1, threads=128):
            A_shared = T.alloc_shared((M, block_K // 2), dtype)
            E_shared = T.alloc_shared((M, block_K // f), e_dtype)
            B_shared = T.alloc_shared((block_K, N), dtype)
            C_local = T.alloc_fragment((M, N), accum)
            T.annotate_layout({E: make_cutlass_metadata_layout(E, mma_dtype=dtype, arch="8.0"),
                               E_shared: make_cutlass_metadata_layout(E_shared, mma_dtype=dtype, arch="8.0")})
            T.clear(C_local)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A_sparse[0, k * block_K // 2], A_shared)
                T.copy(E[0, k * block_K // f], E_shared)
                T.copy(B[k * block_K, 0], B_shared)
                T.gemm_sp(A_shared, E_shared, B_shared, C_local)
            T.copy(C_local, C)

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "A_shared_dense" in kernel.get_kernel_source()
    c = torch.full((M, N), -12345, dtype=torch.int32) if dtype == "int8" else poison((M, N), torch.float32)
    kernel(a_sparse, e, b, c)
    ref = a.int() @ b.int() if dtype == "int8" else a.float() @ b.float()
    torch.testing.assert_close(c, ref, rtol=1e-3, atol=1e-3)


def test_cutlass_metadata_layout_names_what_it_cannot_do():
    from tilelang.layout import LayoutError, make_cutlass_metadata_layout

    e = T.Tensor((64, 4), "int16")
    with pytest.raises(LayoutError, match="pass arch"):
        make_cutlass_metadata_layout(e, T.float16)
    with pytest.raises(tilelang.UnsupportedError, match="sm90 metadata layout.*compress_sm90.*is not provided"):
        make_cutlass_metadata_layout(e, T.float16, arch="9.0")
    with pytest.raises(LayoutError, match="the metadata of float16 A is 16-bit for sm8x; got int32"):
        make_cutlass_metadata_layout(T.Tensor((64, 2), "int32"), T.float16, arch="8.0")
    with pytest.raises(LayoutError, match="rows a multiple of 32"):
        make_cutlass_metadata_layout(T.Tensor((16, 4), "int16"), T.float16, arch="sm_80")


def test_removed_compressors_say_what_to_use():
    with pytest.raises(ImportError, match=r"compress_sm90 is not provided: upstream removed it in 0.1.10.*compress\(A"):
        from tilelang.utils.sparse import compress_sm90  # noqa: F401
    with pytest.raises(ImportError, match="compress_sm80 is not provided.*arch=\"8.0\""):
        from tilelang.utils.sparse import compress_sm80  # noqa: F401
