"""tilelang.quantize: each TIR decoder against a numpy/torch decode of random packed bits (run in the simulator),
the batch decoders of the intrinsic groups (our portable MUSA C for upstream's PTX), and a dequantize-GEMM kernel
with packed int4 weights unpacked in shared memory, against torch."""

import numpy as np
import pytest
import torch
from conftest import poison, rand

import tilelang
import tilelang.language as T
from tilelang.errors import CompileError
from tilelang.quantize import (
    _tir_f32x2_to_bf16x2_to_u32, _tir_packed_int_to_int_convert, _tir_packed_to_fp4_to_f16,
    _tir_packed_to_signed_convert, _tir_packed_to_unsigned_convert, _tir_packed_to_unsigned_convert_with_zeros,
    _tir_u8_to_f4_to_bf16, _tir_u8_to_f8_e4m3_to_f16, _tir_u8_to_f8_e5m2_to_f16, general_compress,
    get_lop3_intrin_group, get_mxfp_intrin_group, interleave_weight,
)

N = 256
TARGET = "musa -arch=mp_31"


def _bytes(seed, dtype=torch.uint8):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (N,), generator=g, dtype=torch.int32).to(torch.uint8).view(dtype)


def _decode_kernel(storage, out_dtype, per, decode):
    """out[i] = decode(packed[i // per], i % per), one element per thread."""

    @T.prim_func
    def main(P: T.Tensor((N,), storage), O: T.Tensor((N * per,), out_dtype)):
        with T.Kernel(per, threads=N) as bx:
            tx = T.get_thread_binding(0)
            i = bx * N + tx
            O[i] = decode(P[i // per], i % per)

    return tilelang.compile(main, target=TARGET)


def _fields(packed: torch.Tensor, nbit: int) -> np.ndarray:
    """Field k of byte j at position j * per + k: bits [k * nbit, k * nbit + nbit)."""
    raw = packed.view(torch.uint8).numpy().astype(np.int64)
    per = 8 // nbit
    return ((raw[:, None] >> (np.arange(per) * nbit)) & ((1 << nbit) - 1)).reshape(-1)


@pytest.mark.parametrize("storage", ["uint8", "int8"])
@pytest.mark.parametrize("nbit", [4, 2])
def test_packed_integer_fields_match_numpy(storage, nbit):
    stype, snbit = storage.rstrip("8"), 8
    per = 8 // nbit
    packed = _bytes(nbit, getattr(torch, storage))
    fields = _fields(packed, nbit)
    cases = {
        "unsigned": (_tir_packed_to_unsigned_convert(stype, snbit), fields),
        "offset": (_tir_packed_to_signed_convert(stype, snbit), fields - (1 << (nbit - 1))),
        "twos": (_tir_packed_int_to_int_convert(stype, snbit), np.where(fields >= 1 << (nbit - 1), fields - (1 << nbit), fields)),
    }
    for name, (convert, expected) in cases.items():
        kernel = _decode_kernel(storage, "float16", per, lambda v, p: convert(nbit, v, p, "float16"))
        out = poison((N * per,), torch.float16)
        kernel(packed, out)
        np.testing.assert_array_equal(out.float().numpy(), expected.astype(np.float32), err_msg=name)


def test_unsigned_with_zero_point_matches_numpy():
    packed = _bytes(5)
    convert = _tir_packed_to_unsigned_convert_with_zeros("uint", 8)
    kernel = _decode_kernel("uint8", "float32", 2, lambda v, p: convert(4, v, p, T.float32(3), "float32"))
    out = poison((N * 2,), torch.float32)
    kernel(packed, out)
    np.testing.assert_array_equal(out.numpy(), (_fields(packed, 4) - 3).astype(np.float32))


def _e2m1_bf16_reference(codes: np.ndarray, scale: int) -> torch.Tensor:
    """The documented decode of _tir_u8_to_f4_to_bf16: sign, exponent e + 126 + scale (clamped to 255), mantissa."""
    s, e, m = codes >> 3, (codes >> 1) & 3, codes & 1
    bits = (s << 15) | (np.minimum(e + 126 + scale, 255) << 7) | (m << 6)
    return torch.from_numpy(bits.astype(np.int16)).view(torch.bfloat16)


@pytest.mark.parametrize("scale", [0, 3])
def test_u8_to_f4_to_bf16_matches_numpy(scale):
    packed = _bytes(7)
    kernel = _decode_kernel("uint8", "bfloat16", 2,
                            lambda v, p: _tir_u8_to_f4_to_bf16(4, v, p, T.uint16(scale), "bfloat16"))
    out = poison((N * 2,), torch.bfloat16)
    kernel(packed, out)
    expected = _e2m1_bf16_reference(_fields(packed, 4), scale)
    assert torch.equal(out.view(torch.int16), expected.view(torch.int16))
    # For non-zero exponents this is the E2M1 value times 2^scale.
    codes = _fields(packed, 4)
    e2m1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])[codes & 7] * np.where(codes >> 3, -1, 1) * 2.0 ** scale
    normal = ((codes >> 1) & 3) != 0
    np.testing.assert_array_equal(out.float().numpy()[normal], e2m1[normal].astype(np.float32))


def test_packed_e3m0_to_f16_matches_numpy():
    packed = _bytes(11)
    kernel = _decode_kernel("uint8", "float16", 2, lambda v, p: _tir_packed_to_fp4_to_f16("uint", 8)(4, v, p, "float16"))
    out = poison((N * 2,), torch.float16)
    kernel(packed, out)
    codes = _fields(packed, 4)
    e = codes & 7
    expected = np.where(e == 0, 0.0, np.where(codes >> 3, -1.0, 1.0) * 2.0 ** (e - 7.0))
    np.testing.assert_array_equal(out.float().numpy(), expected.astype(np.float32))


def test_fp8_codes_to_f16_match_torch():
    packed = _bytes(13)
    e5m2 = _decode_kernel("uint8", "float16", 1, lambda v, p: _tir_u8_to_f8_e5m2_to_f16(8, v, "float16"))
    out = poison((N,), torch.float16)
    e5m2(packed, out)
    # NaN codes stay NaN (their payload bits are not compared: torch canonicalises them)
    torch.testing.assert_close(out, packed.view(torch.float8_e5m2).half(), rtol=0, atol=0, equal_nan=True)
    e4m3 = _decode_kernel("uint8", "float16", 1, lambda v, p: _tir_u8_to_f8_e4m3_to_f16(8, v, "float16"))
    e4m3(packed, out)
    codes = packed.numpy().astype(np.int64)
    expected = np.where(codes >> 7, -1.0, 1.0) * 2.0 ** (((codes >> 3) & 15) - 7.0) * (1 + (codes & 7) / 8)
    np.testing.assert_array_equal(out.float().numpy(), expected.astype(np.float32))


def test_f32x2_to_bf16x2_rounds_to_nearest_even():
    @T.prim_func
    def main(A: T.Tensor((N, 2), "float32"), O: T.Tensor((N,), "uint32")):
        with T.Kernel(1, threads=N):
            tx = T.get_thread_binding(0)
            O[tx] = _tir_f32x2_to_bf16x2_to_u32(A[tx, 0], A[tx, 1])

    a = rand((N, 2), torch.float32, seed=17)
    out = torch.zeros((N,), dtype=torch.uint32)
    tilelang.compile(main, target=TARGET)(a, out)
    halves = a.to(torch.bfloat16).view(torch.int16).to(torch.int64) & 0xFFFF
    assert torch.equal(out.to(torch.int64), halves[:, 0] | (halves[:, 1] << 16))


# ---- intrinsic groups: batch decoders of our template library --------------------------------------------------------


def _batch_kernel(func_name, source, elems, storage, out_dtype, bytes_per_call, scale=None):
    """One decoder call per thread on `bytes_per_call` packed bytes; with `scale`, its third argument points at a
    float16 holding it."""
    calls = N // bytes_per_call

    @T.prim_func
    def main(P: T.Tensor((N,), storage), O: T.Tensor((calls * elems,), out_dtype)):
        with T.Kernel(1, threads=calls):
            tx = T.get_thread_binding(0)
            q = T.alloc_local((bytes_per_call,), storage)
            d = T.alloc_local((elems,), out_dtype)
            s = T.alloc_local((1,), "float16")
            T.import_source(source)
            for v in T.serial(bytes_per_call):
                q[v] = P[tx * bytes_per_call + v]
            if scale is None:
                T.call_extern("handle", func_name, T.access_ptr(q, "r"), T.access_ptr(d, "w"))
            else:
                s[0] = T.float16(scale)
                T.call_extern("handle", func_name, T.access_ptr(q, "r"), T.access_ptr(d, "w"), T.access_ptr(s, "r"))
            for v in T.serial(elems):
                O[tx * elems + v] = d[v]

    return tilelang.compile(main, target=TARGET)


@pytest.mark.parametrize("fmt", ["uint", "int"])
def test_lop3_group_decodes_interleaved_int4(fmt):
    group = get_lop3_intrin_group("float16", source_format=fmt, source_bit=4, storage_dtype="int8")
    assert group["func_name"] == f"decode_i4{'u' if fmt == 'uint' else 's'}_to_f16"
    kernel = _batch_kernel(group["func_name"], group["c_source"], 8, "int8", "float16", 4)
    assert f"{group['func_name']}(" in kernel.get_kernel_source() and "asm" not in kernel.get_kernel_source()
    natural = _bytes(19, torch.int8)
    out = poison((N * 2,), torch.float16)
    kernel(interleave_weight(natural, 4, "float16"), out)
    expected = _fields(natural, 4) - (8 if fmt == "int" else 0)
    np.testing.assert_array_equal(out.float().numpy(), expected.astype(np.float32))


@pytest.mark.parametrize("bits", [4, 2])
@pytest.mark.parametrize("fmt", ["uint", "int"])
def test_lop3_group_scaled_decoders_multiply_each_field_by_the_scale(fmt, bits):
    group = get_lop3_intrin_group("float16", source_format=fmt, source_bit=bits, storage_dtype="int8",
                                  with_scaling=True)
    assert group["func_name"] == f"decode_i{bits}{'u' if fmt == 'uint' else 's'}_to_f16_scale"
    bytes_per_call = bits  # 8 outputs of `bits` bits each
    kernel = _batch_kernel(group["func_name"], group["c_source"], 8, "int8", "float16", bytes_per_call, scale=1.5)
    natural = _bytes(29, torch.int8)
    out = poison((N * 8 // bytes_per_call,), torch.float16)
    kernel(interleave_weight(natural, bits, "float16"), out)
    expected = (_fields(natural, bits) - ((1 << (bits - 1)) if fmt == "int" else 0)) * 1.5
    np.testing.assert_array_equal(out.float().numpy(), expected.astype(np.float32))


def test_mxfp_group_twiddling_matches_its_bit_layout():
    group = get_mxfp_intrin_group("bfloat16", source_bit=4, storage_dtype="uint8", use_twiddling=True)
    # Called without N, the decoder takes its default N = 8: 8 words (32 bytes) in, 64 values out per call.
    kernel = _batch_kernel(group["func_name"], group["c_source"], 64, "uint8", "bfloat16", 32)
    packed = _bytes(23)
    out = poison((N * 2,), torch.bfloat16)
    kernel(packed, out)
    # numpy: byte-reverse each word, pick the 4 codes' lanes, read (bit 15, bits 8-7, bit 6) as E2M1.
    b = packed.numpy().astype(np.uint64).reshape(-1, 4)
    x = (b[:, 0] << 24) | (b[:, 1] << 16) | (b[:, 2] << 8) | b[:, 3]
    mask = 0x81C081C0
    codes = [x & mask, (x << 3) & mask, (x << 6) & mask,
             ((x << 1) & 0x80008000) | ((x >> 3) & 0x01800180) | ((x >> 7) & 0x00400040)]
    table = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
    expected = np.zeros((len(x), 8))
    for j, c in enumerate(codes):
        for lane, slot in ((c >> 16, j), (c & 0xFFFF, j + 4)):
            e2m1 = (((lane >> 7) & 3) << 1 | ((lane >> 6) & 1)).astype(np.int64)
            expected[:, slot] = np.where((lane >> 15) & 1, -1, 1) * table[e2m1]
    np.testing.assert_array_equal(out.float().numpy(), expected.reshape(-1).astype(np.float32))


def test_import_source_with_ptx_is_a_clear_error():
    with pytest.raises(CompileError, match="inline assembly"):
        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                T.import_source('__device__ void f(unsigned *x) { asm volatile("lop3.b32 ..."); }')


def test_unprovided_lop3_variant_names_itself():
    with pytest.raises(NotImplementedError, match="i1u_to_float16"):
        get_lop3_intrin_group("float16", source_bit=1)


# ---- a dequantize GEMM ------------------------------------------------------------------------------------------------


def _dequant_gemm(M, N_, K, bm, bn, bk, threads=128):
    """C = A @ dequant(Bq).T, Bq (N, K / 2) int8: two signed int4 per byte (element 2j in the low nibble), unpacked
    from shared memory into a float16 shared tile, then T.gemm."""
    decode = _tir_packed_int_to_int_convert("int", 8)

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), Bq: T.Tensor((N_, K // 2), "int8"), C: T.Tensor((M, N_), "float32")):
        with T.Kernel(T.ceildiv(N_, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            Bq_s = T.alloc_shared((bn, bk // 2), "int8")
            B_s = T.alloc_shared((bn, bk), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(Bq[bx * bn, k * bk // 2], Bq_s)
                for i, j in T.Parallel(bn, bk):
                    B_s[i, j] = decode(4, Bq_s[i, j // 2], j % 2, "float16")
                T.gemm(A_s, B_s, acc, transpose_B=True)
            T.copy(acc, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_int4_dequantize_gemm_matches_torch(arch):
    M, N_, K = 128, 128, 128
    kernel = tilelang.compile(_dequant_gemm(M, N_, K, 64, 64, 64), target=f"musa -arch={arch}")
    src = kernel.get_kernel_source()
    # the decode in the generated C: nibble select, mask, and the sign extension of a 4-bit field in int32
    assert "& 1) * 4)) & 15) << 28) >> 28)" in src and "B_s[" in src
    g = torch.Generator().manual_seed(29)
    w = torch.randint(-8, 8, (N_, K), generator=g, dtype=torch.int8)
    a = rand((M, K), torch.float16, seed=31)
    c = poison((M, N_), torch.float32)
    kernel(a, general_compress(w, 4), c)
    torch.testing.assert_close(c, a.float() @ w.float().T, rtol=1e-2, atol=1e-2)


def test_upstreams_quantization_module_path_names_the_same_decoders():
    from tilelang.quantize import quantization

    assert quantization._tir_u32_to_int_to_float is tilelang.quantize._tir_u32_to_int_to_float
    assert quantization._tir_u8_to_f4_to_bf16 is tilelang.quantize._tir_u8_to_f4_to_bf16
