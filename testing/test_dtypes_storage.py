"""Tensor dims that are expressions of size variables; FP4 (float4_e2m1fn) storage; T.tfloat32; "float8_e4m3".

Size variables are bound at launch from dims (and strides) that are exactly the variable; one that appears only in
expressions is solved from a dim linear in it (`n * 4`, `n * 3 + 1`); every expression dim is checked against the
tensor. FP4 tensors are uint8 tensors with two values a byte (even element in the low nibble): logical last dim
2x the bytes, other strides 2x the byte strides (upstream's test_tilelang_language_subtype.py).
"""

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

ARCHES = ["musa -arch=mp_31", "musa -arch=mp_22"]
FP4_VALUES = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


# an fp4 output comes back in torch's packed fp4 dtype where torch has one (as upstream main), else as bytes
PACKED_FP4 = getattr(torch, "float4_e2m1fn_x2", torch.uint8)

def fp4_decode(packed: torch.Tensor) -> torch.Tensor:
    """Reference: uint8 [..., n] of packed E2M1 -> float32 [..., 2n] (low nibble = even element)."""
    packed = packed.view(torch.uint8).long()
    codes = torch.stack([packed & 0xF, packed >> 4], dim=-1).flatten(-2)
    return FP4_VALUES[codes]


def fp4_encode_codes(x: torch.Tensor) -> torch.Tensor:
    """Reference round-to-nearest-even onto E2M1 codes (ties to the even code); beyond 6 saturates, NaN -> +6."""
    values = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
    a = np.abs(x.numpy().astype(np.float64))
    gap = np.abs(a[..., None] - values)
    best = gap.min(-1, keepdims=True)
    ties = gap == best
    even = np.where(ties & (np.arange(8) % 2 == 0), 1, 0)
    code = np.where(even.any(-1), even.argmax(-1), ties.argmax(-1))
    code = np.where(a >= 6, 7, code)
    sign = np.signbit(x.numpy()) & ~np.isnan(x.numpy())
    code = np.where(np.isnan(x.numpy()), 7, code | (sign * 8))
    return torch.from_numpy(code.astype(np.uint8))


def fp4_pack(codes: torch.Tensor) -> torch.Tensor:
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).to(torch.uint8)


# ---- expression dims ----------------------------------------------------------------------------------------------


def _annot_kernel(extent):
    n = T.symbolic("n")

    @T.prim_func
    def kernel(A: T.Tensor((extent(n),), T.int32)):
        with T.Kernel(1) as _:
            for i in range(extent(n)):
                A[i] = 0

    return kernel


@pytest.mark.parametrize("extent,text", [(lambda n: n * 4, "n * 4"), (lambda n: n + 1, "n + 1"),
                                         (lambda n: n * 3 + 1, "n * 3) + 1")])
def test_expression_dim_binds_its_variable_as_upstream_annot_tests(extent, text):
    kernel = tilelang.compile(_annot_kernel(extent), target=ARCHES[0])
    assert text in kernel.get_kernel_source()  # the loop bound is the expression of the size parameter
    a = torch.arange(16, dtype=torch.int32)
    kernel(a)
    assert torch.equal(a, torch.zeros(16, dtype=torch.int32))


def repeat_rows_program():
    m = T.dynamic("m")

    @T.prim_func
    def repeat_rows(x: T.Tensor((m, 16), T.float16), y: T.Tensor((m * 4, 16), T.float16)):
        with T.Kernel(m, threads=32) as bx:
            for i in T.serial(4):
                for j in T.Parallel(16):
                    y[bx * 4 + i, j] = x[bx, j]

    return repeat_rows


@pytest.mark.parametrize("target", ARCHES)
def test_expression_dim_shares_a_variable_with_a_plain_dim(target):
    kernel = tilelang.compile(repeat_rows_program(), target=target)
    assert "int m)" in kernel.get_kernel_source()  # m is bound from x's dim 0 and passed to the kernel
    assert kernel.launcher.bind_shapes(rand((5, 16), torch.float16), poison((20, 16), torch.float16)) == {"m": 5}
    x = rand((5, 16), torch.float16)
    y = poison((20, 16), torch.float16)
    kernel(x, y)
    torch.testing.assert_close(y, x.repeat_interleave(4, 0), rtol=0, atol=0)


def test_expression_dim_mismatch_is_a_clear_launch_error():
    x = rand((5, 16), torch.float16)
    with pytest.raises(ValueError, match=r"y.shape\[0\] must be `m \* 4` = 20 \(m = 5\); got 16"):
        tilelang.compile(repeat_rows_program())(x, poison((16, 16), torch.float16))
    kernel = tilelang.compile(_annot_kernel(lambda n: n * 3))
    with pytest.raises(ValueError, match=r"A.shape\[0\] is 16, which `n \* 3` equals for no integer n"):
        kernel(torch.zeros(16, dtype=torch.int32))
    kernel = tilelang.compile(_annot_kernel(lambda n: n + 5))
    with pytest.raises(ValueError, match=r"would make n = -2 in `n \+ 5`; sizes cannot be negative"):
        kernel(torch.zeros(3, dtype=torch.int32))


def test_a_variable_only_in_nonlinear_dims_is_a_compile_error():
    with pytest.raises(tilelang.CompileError, match=r"size variable\(s\) n .* \(A: Tensor\[\(n \* n,\), int32\]\)"):
        tilelang.compile(_annot_kernel(lambda n: n * n))


# ---- upstream's subtype tests: fp4 shape and stride binding ---------------------------------------------------------


@tilelang.jit
def basic_shape_kernel(x):
    m = T.dynamic("m")
    x: T.Tensor[(m, 16), T.float4_e2m1fn]
    with T.Kernel(1, threads=32):
        pass


@tilelang.jit
def strided_kernel(x):
    m = T.dynamic("m")
    s = T.dynamic("s")
    x: T.StridedTensor[[m, 16], [s, 1], T.float4_e2m1fn]
    with T.Kernel(1, threads=32):
        pass


@tilelang.jit
def symbolic_last_dim_strided_kernel(x):
    n = T.dynamic("n")
    s = T.dynamic("s")
    x: T.StridedTensor[[4, n], [s, 1], T.float4_e2m1fn]
    with T.Kernel(1, threads=32):
        pass


@tilelang.jit
def shared_symbolic_kernel(x, y):
    m = T.dynamic("m")
    x: T.Tensor[(m, 16), T.float4_e2m1fn]
    y: T.Tensor[(m * 4, 16), T.float4_e2m1fn]
    with T.Kernel(1, threads=32):
        pass


@tilelang.jit
def shared_symbolic_strided_kernel(x, y):
    m = T.dynamic("m")
    s = T.dynamic("s")
    x: T.StridedTensor[[m, 16], [s, 1], T.float4_e2m1fn]
    y: T.StridedTensor[[m * 2, 16], [s, 1], T.float4_e2m1fn]
    with T.Kernel(1, threads=32):
        pass


@tilelang.jit
def complex_expr_kernel(x, y):
    m = T.dynamic("m")
    n = T.dynamic("n")
    x: T.Tensor[(m, n * 2), T.float4_e2m1fn]
    y: T.Tensor[(m * 2, n), T.float4_e2m1fn]
    with T.Kernel(1, threads=32):
        pass


def _bytes(*shape):
    return torch.randint(0, 256, shape, dtype=torch.uint8)


def test_subtype_shapes_and_strides_bind_as_upstream():
    for m in (1, 2, 8):
        basic_shape_kernel(_bytes(m, 8))
    strided_kernel(_bytes(4, 8))
    for mult in (1, 2, 4):
        strided_kernel(_bytes(4 * mult, 8)[::mult])  # byte stride 8 * mult -> fp4 stride 16 * mult
    symbolic_last_dim_strided_kernel(_bytes(4, 16))
    symbolic_last_dim_strided_kernel(_bytes(8, 16)[::2])
    for m in (1, 4):
        shared_symbolic_kernel(_bytes(m, 8), _bytes(m * 4, 8))
        shared_symbolic_strided_kernel(_bytes(m, 8), _bytes(m * 2, 8))
    shared_symbolic_strided_kernel(_bytes(8, 8)[::2], _bytes(16, 8)[::2])
    for m, n in [(2, 8), (4, 16)]:
        complex_expr_kernel(_bytes(m, n), _bytes(m * 2, n // 2))
    # int8 views (upstream passes `.view(torch.int8)`) and torch's packed dtype are accepted too.
    basic_shape_kernel(_bytes(2, 8).view(torch.int8))
    basic_shape_kernel(_bytes(2, 8).view(torch.float4_e2m1fn_x2))


def test_subtype_binding_errors_name_the_tensor():
    with pytest.raises(ValueError, match=r"x dim 1 must be 16; got 18 \(9 bytes of 2 float4_e2m1fn values\)"):
        basic_shape_kernel(_bytes(2, 9))
    with pytest.raises(ValueError, match=r"y.shape\[0\] must be `m \* 4` = 8 \(m = 2\); got 6"):
        shared_symbolic_kernel(_bytes(2, 8), _bytes(6, 8))
    with pytest.raises(ValueError, match="whose stride must be 1"):
        strided_kernel(_bytes(4, 16)[:, ::2])
    with pytest.raises(TypeError, match=r"x expects dtype float4_e2m1fn, passed as bytes .*; got torch.float16"):
        basic_shape_kernel(torch.zeros(2, 8, dtype=torch.float16))


# ---- fp4 loads and stores --------------------------------------------------------------------------------------------


def dequant_program(block_n=64):
    m = T.dynamic("m")
    n = T.dynamic("n")
    s = T.dynamic("s")

    @T.prim_func
    def dequant(x: T.StridedTensor((m, n), (s, 1), T.float4_e2m1fn), y: T.Tensor((m, n), T.float16)):
        with T.Kernel(m, T.ceildiv(n, block_n), threads=32) as (bx, by):
            for j in T.Parallel(block_n):
                if by * block_n + j < n:
                    y[bx, by * block_n + j] = T.cast(x[bx, by * block_n + j], T.float16)

    return dequant


@pytest.mark.parametrize("target", ARCHES)
def test_fp4_dequant_matches_a_reference_decode_of_the_nibbles(target):
    kernel = tilelang.compile(dequant_program(), out_idx=[1], target=target)
    src = kernel.get_kernel_source()
    assert "unsigned char* __restrict__ x" in src and "tl::fp4_e2m1_to_float(x[" in src and ">> 1], " in src
    for shape in [(3, 40), (5, 130)]:
        packed = _bytes(shape[0] * 2, shape[1])[::2]  # rows 2x the bytes apart: a strided fp4 tensor
        y = kernel(packed)
        assert y.shape == (shape[0], 2 * shape[1]) and y.dtype == torch.float16
        torch.testing.assert_close(y.float(), fp4_decode(packed), rtol=0, atol=0)


def quantize_program():
    m = T.dynamic("m")

    @T.prim_func
    def quantize(x: T.Tensor((m, 48), T.float32), q: T.Tensor((m, 48), T.float4_e2m1fn)):
        with T.Kernel(m, threads=48) as bx:
            for j in T.Parallel(48):  # one element per thread: neighbours write the two nibbles of a byte at once
                q[bx, j] = T.cast(x[bx, j], T.float4_e2m1fn)

    return quantize


@pytest.mark.parametrize("target", ARCHES)
def test_fp4_store_rounds_to_nearest_even_and_packs_nibbles(target):
    kernel = tilelang.compile(quantize_program(), out_idx=[1], target=target)
    src = kernel.get_kernel_source()
    assert "tl::fp4_e2m1_store(&q[" in src and "tl::float_to_fp4_e2m1(x[" in src
    grid = torch.tensor([0.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, 100.0, float("inf"), float("nan"), -0.0])
    x = torch.cat([rand((4, 48 - 26), torch.float32) * 3, grid.repeat(4, 2)], dim=1)
    x[1] = -x[1]
    q = kernel(x)
    assert q.dtype == PACKED_FP4 and q.shape == (4, 24)  # the output is allocated as bytes
    torch.testing.assert_close(q.view(torch.uint8), fp4_pack(fp4_encode_codes(x)), rtol=0, atol=0)


@tilelang.jit(out_idx=None)
def scatter_rows(src, dst, perm):
    nv = T.dynamic("n")
    src: T.Tensor[(nv, 128), T.float4_e2m1fn]
    dst: T.Tensor[(nv, 128), T.float4_e2m1fn]
    perm: T.Tensor[(nv,), T.int32]
    with T.Kernel(nv, threads=32) as i:
        for k in T.serial(128):
            dst[perm[i], k] = src[i, k]


def test_fp4_copy_between_fp4_tensors_is_bit_exact_as_upstream_scatter():
    n = 24
    src = _bytes(n, 64).view(torch.int8)
    dst = torch.zeros(n, 64, dtype=torch.uint8).view(torch.int8)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(0)).to(torch.int32)
    scatter_rows(src, dst, perm)
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(n, dtype=torch.int32)
    assert torch.equal(dst.view(torch.uint8), src.view(torch.uint8)[inv.long()])


def test_fp4_arithmetic_is_rejected_at_its_line():
    def build():
        @T.prim_func
        def k(x: T.Tensor((64,), T.float4_e2m1fn), y: T.Tensor((64,), T.float16)):
            with T.Kernel(1, threads=64) as _:
                for i in T.Parallel(64):
                    y[i] = x[i] * x[i]

        return k

    with pytest.raises(tilelang.CompileError, match="float4_e2m1fn values: fp4 is a storage type") as info:
        build()
    assert "y[i] = x[i] * x[i]" in str(info.value)


def shared_fp4_program(m, n):
    @T.prim_func
    def main(X: T.Tensor((m, n), "float32"), Q: T.Tensor((m, n), "float4_e2m1fn")):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((m, n), "float32")
            tile = T.alloc_shared((m, n), "float4_e2m1fn")
            T.copy(X, x)
            for i, j in T.Parallel(m, n):  # each thread writes its nibbles of the shared bytes
                tile[i, j] = x[i, j] * 2.0
            T.copy(tile, Q)  # read by other threads: after a barrier

    return main


@pytest.mark.parametrize("target", ARCHES)
def test_fp4_shared_tile_is_a_byte_tile_of_nibbles(target):
    m, n = 4, 96
    kernel = tilelang.compile(shared_fp4_program(m, n), out_idx=[1], target=target)
    src = kernel.get_kernel_source()
    assert "tl::fp4_e2m1_store(&buf_dyn_shmem[" in src and "tl::fp4_e2m1_bits(buf_dyn_shmem[" in src, src
    assert src.index("__syncthreads()") < src.index("tl::fp4_e2m1_bits(buf_dyn_shmem["), src
    x = rand((m, n), torch.float32) * 3
    q = kernel(x)
    assert q.dtype == PACKED_FP4 and q.shape == (m, n // 2)
    torch.testing.assert_close(q.view(torch.uint8), fp4_pack(fp4_encode_codes(x * 2.0)), rtol=0, atol=0)


def fp4_fragment_program(m, n):
    """fp4 values copied into a fragment, the absolute maximum of each row reduced from it in float16, and each
    value scaled by its row's maximum (casts before any arithmetic: fp4 is storage)."""
    @T.prim_func
    def main(Q: T.Tensor((m, n), "float4_e2m1fn"), Y: T.Tensor((m, n), "float32")):
        with T.Kernel(1, threads=64):
            q = T.alloc_fragment((m, n), "float4_e2m1fn")
            amax = T.alloc_fragment((m,), "float16")
            T.copy(Q, q)
            T.reduce_absmax(q, amax, dim=1)
            for i, j in T.Parallel(m, n):
                Y[i, j] = T.cast(q[i, j], "float32") * T.cast(amax[i], "float32")

    return main


@pytest.mark.parametrize("target", ARCHES)
def test_fp4_fragment_holds_a_code_a_byte(target):
    m, n = 4, 64
    kernel = tilelang.compile(fp4_fragment_program(m, n), out_idx=[1], target=target)
    src = kernel.get_kernel_source()
    # the fragment is a byte array of codes: filled from the packed tensor's nibbles, decoded from its low nibbles
    assert "unsigned char q[" in src and "tl::fp4_e2m1_bits(Q[" in src and "tl::fp4_e2m1_to_float(q[" in src, src
    assert "tl::fp4_e2m1_store(&q[" not in src, src
    packed = _bytes(m, n // 2)
    values = fp4_decode(packed)
    torch.testing.assert_close(kernel(packed), values * values.abs().amax(1, keepdim=True), rtol=0, atol=0)


def test_fp4_var_allocation_is_rejected_by_name():
    def build():
        @T.prim_func
        def k(x: T.Tensor((64,), T.float16)):
            with T.Kernel(1, threads=64) as _:
                T.alloc_var("float4_e2m1fn")

    with pytest.raises(tilelang.UnsupportedError, match=r"T.alloc_var\(..., \"float4_e2m1fn\"\): fp4 is a storage"):
        build()


def test_float6_stays_rejected():
    with pytest.raises(tilelang.UnsupportedError, match="float6"):
        T.Tensor((4,), "float6_e3m2fn")


# ---- float8_e4m3 spelling and T.tfloat32 -----------------------------------------------------------------------------


def fp8_program():
    @T.prim_func
    def cast_fp8(x: T.Tensor((128,), "float32"), q: T.Tensor((128,), "float8_e4m3"), y: T.Tensor((128,), "float16")):
        with T.Kernel(1, threads=128) as _:
            s = T.alloc_shared((128,), "float8_e4m3")
            for i in T.Parallel(128):
                s[i] = T.cast(x[i], "float8_e4m3")
            for i in T.Parallel(128):
                q[i] = s[i]
                y[i] = T.cast(s[i], "float16")

    return cast_fp8


@pytest.mark.parametrize("target", ARCHES)
def test_float8_e4m3_string_is_float8_e4m3fn_everywhere(target):
    assert T.dtype("float8_e4m3") == "float8_e4m3fn" == T.float8_e4m3
    kernel = tilelang.compile(fp8_program(), out_idx=[1, 2], target=target)
    assert {p.dtype for p in kernel.params if p.name == "q"} == {"float8_e4m3fn"}
    src = kernel.get_kernel_source()
    assert "fp8_e4_t* __restrict__ q" in src and "fp8_e4_t* s = " in src and "cast<fp8_e4_t>(" in src
    x = rand((128,), torch.float32) * 100
    q, y = kernel(x)
    assert q.dtype == torch.float8_e4m3fn
    torch.testing.assert_close(q.float(), x.to(torch.float8_e4m3fn).float(), rtol=0, atol=0)
    torch.testing.assert_close(y, x.to(torch.float8_e4m3fn).half(), rtol=0, atol=0)


def test_tfloat32_is_float32_storage():
    assert T.tfloat32 == "float32" and T.dtype("tfloat32") == T.float32 and T.tfloat32.as_torch() is torch.float32

    @T.prim_func
    def scale(x: T.Tensor((64,), T.tfloat32), y: T.Tensor((64,), T.tfloat32)):
        with T.Kernel(1, threads=64) as _:
            for i in T.Parallel(64):
                y[i] = x[i] * 2.0

    x = rand((64,), torch.float32)
    torch.testing.assert_close(tilelang.compile(scale, out_idx=[1])(x), x * 2)


FNUZ = [("float8_e4m3fnuz", torch.float8_e4m3fnuz, "fp8_e4fnuz_t"),
        ("float8_e5m2fnuz", torch.float8_e5m2fnuz, "fp8_e5fnuz_t")]


def _fnuz_roundtrip(dtype, n):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Q: T.Tensor((n,), dtype), Codes: T.Tensor((256,), dtype),
             Decoded: T.Tensor((256,), "float32")):
        with T.Kernel(n // 256, threads=256) as bx:
            tx = T.get_thread_binding()
            Q[bx * 256 + tx] = T.cast(X[bx * 256 + tx], dtype)
            if bx == 0:
                Decoded[tx] = T.cast(Codes[tx], "float32")

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("dtype, torch_dtype, c_name", FNUZ)
def test_fnuz_float8_conversions_are_bit_exact_with_torch(arch, dtype, torch_dtype, c_name):
    """AMD's fnuz float8 formats (no negative zero; 0x80 is the only NaN; overflow, infinity and NaN become NaN): no
    MUSA instruction reads them, so they are storage types converted in software. Every code decodes as torch
    decodes it, and float -> fnuz rounds as torch does on random values, ties, subnormals and the specials."""
    n = 4096
    kernel = tilelang.compile(_fnuz_roundtrip(dtype, n), target=f"musa -arch={arch}")
    assert f"{c_name}* __restrict__ Q" in kernel.get_kernel_source()
    g = torch.Generator().manual_seed(17)
    top = torch.tensor(57344.0 if "e5m2" in dtype else 240.0)
    x = torch.cat([
        torch.randn(n // 2, generator=g) * torch.logspace(-12, 6, n // 2, base=2.0),  # every binade, both signs
        torch.arange(256, dtype=torch.uint8).view(torch_dtype).float().nan_to_num(0.0) * 1.0625,  # near the codes
        torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-30, -1e-30, 65504.0, -1e9]),
        top * torch.tensor([1.0, -1.0, 1.03, 1.0625, -1.07, 1.2]),  # the largest value, rounding past it
    ])
    x = torch.cat([x, torch.randn(n - x.numel(), generator=g)])
    codes = torch.arange(256, dtype=torch.uint8).view(torch_dtype)
    q = torch.zeros(n, dtype=torch.uint8).view(torch_dtype)
    decoded = poison((256,), torch.float32)
    kernel(x, q, codes, decoded)
    assert torch.equal(q.view(torch.uint8), x.to(torch_dtype).view(torch.uint8))
    expected = codes.float()
    assert torch.equal(decoded.isnan(), expected.isnan()) and decoded.isnan().sum() == 1
    assert torch.equal(decoded.nan_to_num(0.0), expected.nan_to_num(0.0))
