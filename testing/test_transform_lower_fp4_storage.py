"""LowerFP4Storage: float4_e2m1fn tensors and shared tiles become byte buffers holding two codes a byte (the even
element in the low nibble); after FlattenBuffer, a cast of element i decodes `x[i >> 1]`'s nibble `i & 1`
(`tl::fp4_e2m1_to_float`), a store of a cast value encodes it and writes the nibble (`tl::fp4_e2m1_store`), an fp4 to
fp4 store moves the code (`tl::fp4_e2m1_bits`). Registers hold one code a byte, stored plainly. Any other use of an fp4
value is arithmetic MUSA does not have: an error."""

import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from tilelang_musa.errors import CompileError
from tilelang_musa.transform.lower_fp4_storage import LowerFP4Storage, lower_fp4_storage
from tilelang_musa.transform.pass_base import run_pass


def _assert_lowers_to(before, expected):
    tvm.ir.assert_structural_equal(lower_fp4_storage(before),
                                   expected.with_attr("global_symbol", before.attrs["global_symbol"]))


@T.prim_func
def tensors_before(A: T.Buffer((64,), "float4_e2m1fn"), B: T.Buffer((64,), "float16"),
                   C: T.Buffer((64,), "float4_e2m1fn")):
    for tx in T.thread_binding(64, thread="threadIdx.x"):
        B[tx] = T.Cast("float16", A[tx])
        C[tx] = T.Cast("float4_e2m1fn", B[tx])
        C[63 - tx] = A[tx]


@T.prim_func
def tensors_expected(A: T.Buffer((32,), "uint8"), B: T.Buffer((64,), "float16"), C: T.Buffer((32,), "uint8")):
    for tx in T.thread_binding(64, thread="threadIdx.x"):
        B[tx] = T.Cast("float16", T.call_extern("float32", "tl::fp4_e2m1_to_float", A[tx >> 1], tx & 1))
        T.call_extern("int32", "tl::fp4_e2m1_store", T.address_of(C[tx >> 1]), tx & 1,
                      T.call_extern("uint8", "tl::float_to_fp4_e2m1", T.Cast("float32", B[tx])))
        T.call_extern("int32", "tl::fp4_e2m1_store", T.address_of(C[(63 - tx) >> 1]), (63 - tx) & 1,
                      T.call_extern("uint8", "tl::fp4_e2m1_bits", A[tx >> 1], tx & 1))


def test_fp4_tensors_hold_two_codes_a_byte_and_their_elements_go_through_the_nibble_helpers():
    _assert_lowers_to(tensors_before, tensors_expected)


@T.prim_func
def register_before(A: T.Buffer((64,), "float4_e2m1fn"), C: T.Buffer((64,), "float4_e2m1fn")):
    for tx in T.thread_binding(64, thread="threadIdx.x"):
        L = T.alloc_buffer((2,), "float4_e2m1fn", scope="local")
        L[1] = A[tx]
        C[tx] = L[1]


@T.prim_func
def register_expected(A: T.Buffer((32,), "uint8"), C: T.Buffer((32,), "uint8")):
    for tx in T.thread_binding(64, thread="threadIdx.x"):
        L = T.alloc_buffer((2,), "uint8", scope="local")
        L[1] = T.call_extern("uint8", "tl::fp4_e2m1_bits", A[tx >> 1], tx & 1)
        T.call_extern("int32", "tl::fp4_e2m1_store", T.address_of(C[tx >> 1]), tx & 1,
                      T.call_extern("uint8", "tl::fp4_e2m1_bits", L[1], 0))


def test_a_register_array_holds_one_code_a_byte_stored_plainly():
    """A nibble store's atomics need memory; a thread's own registers take the code in a byte of their own."""
    _assert_lowers_to(register_before, register_expected)


def test_a_kernel_without_fp4_is_unchanged():
    @T.prim_func
    def halves(B: T.Buffer((64,), "float16")):
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            B[tx] = B[tx] * T.float16(2)

    assert lower_fp4_storage(halves).same_as(halves)


@T.prim_func
def rounded_through_fp4_before(B: T.Buffer((64,), "float16")):
    for tx in T.thread_binding(64, thread="threadIdx.x"):
        B[tx] = T.Cast("float16", T.Cast("float32", T.Cast("float4_e2m1fn", B[tx])) * T.float32(2))


@T.prim_func
def rounded_through_fp4_expected(B: T.Buffer((64,), "float16")):
    for tx in T.thread_binding(64, thread="threadIdx.x"):
        B[tx] = T.Cast("float16", T.call_extern("float32", "tl::fp4_e2m1_to_float", T.call_extern(
            "uint8", "tl::float_to_fp4_e2m1", T.Cast("float32", B[tx]))) * T.float32(2))


def test_a_value_rounded_through_fp4_in_a_kernel_without_fp4_buffers_is_lowered():
    """`T.Cast(f32, T.Cast(fp4, v))` (DeepSeek-V4's fused fp4 quantize-dequantize) with no fp4 tensor or tile in the
    kernel: encoded and decoded as in one that has them (the printer has no fp4 type; it stopped there before)."""
    _assert_lowers_to(rounded_through_fp4_before, rounded_through_fp4_expected)


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_fused_fp4_quantize_dequantize_runs(arch):
    @T.prim_func
    def main(X: T.Tensor((32, 64), T.bfloat16), S: T.Tensor((32,), T.float32), Y: T.Tensor((32, 64), T.bfloat16)):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(32, 64):
                Y[i, j] = T.Cast(T.bfloat16, T.Cast(T.float32, T.Cast(
                    "float4_e2m1fn", T.clamp(X[i, j] / S[i], -6.0, 6.0))) * S[i])

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert "tl::fp4_e2m1_to_float(tl::float_to_fp4_e2m1(" in kernel.get_kernel_source()
    x = torch.randn((32, 64), generator=torch.Generator().manual_seed(5)).to(torch.bfloat16) * 4
    s = torch.rand((32,), generator=torch.Generator().manual_seed(6)) + 0.5
    y = torch.full((32, 64), float("nan"), dtype=torch.bfloat16)
    kernel(x, s, y)
    v = (x.float() / s[:, None]).clamp(-6, 6)
    grid = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])  # the e2m1 magnitudes, code 0..7
    gaps = (v.abs()[..., None] - grid).abs()
    code = gaps.argmin(-1)  # the lower code on a tie: take the even one (round half to even)
    tie = (gaps == gaps.min(-1, keepdim=True).values).sum(-1) > 1
    nearest = grid[torch.where(tie & (code % 2 == 1), code + 1, code)]
    want = (torch.sign(v) * nearest * s[:, None]).to(torch.bfloat16)
    torch.testing.assert_close(y, want, rtol=0, atol=0)


def test_an_fp4_value_used_other_than_cast_or_stored_is_an_error_naming_it():
    """(The frontend already rejects fp4 arithmetic in a store; an fp4 value handed to a call reaches the pass.)"""
    @T.prim_func
    def handed_over(A: T.Buffer((64,), "float4_e2m1fn")):
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            T.evaluate(T.call_extern("int32", "consume", A[tx]))

    with pytest.raises(CompileError, match=r"kernel `handed_over`: the fp4 element `A\[tx\]`: float4_e2m1fn is a "
                                           "storage type"):
        run_pass(LowerFP4Storage(), tvm.IRModule({"main": handed_over}))


@T.prim_func
def int4_before(A: T.Buffer((64,), "int4"), B: T.Buffer((64,), "int32"), C: T.Buffer((64,), "uint4")):
    for tx in T.thread_binding(64, thread="threadIdx.x"):
        B[tx] = T.Cast("int32", A[tx])
        C[63 - tx] = T.Cast("uint4", B[tx])


@T.prim_func
def int4_expected(A: T.Buffer((32,), "uint8"), B: T.Buffer((64,), "int32"), C: T.Buffer((32,), "uint8")):
    for tx in T.thread_binding(64, thread="threadIdx.x"):
        B[tx] = (T.call_extern("int32", "tl::int4_nibble", A[tx >> 1], tx & 1)
                 - T.shift_left(T.bitwise_and(T.call_extern("int32", "tl::int4_nibble", A[tx >> 1], tx & 1), 8), 1))
        T.call_extern("int32", "tl::int4_nibble_store", T.address_of(C[(63 - tx) >> 1]), (63 - tx) & 1,
                      T.bitwise_and(B[tx], 15))


def test_int4_elements_are_nibbles_read_sign_extended_and_stored_by_read_modify_write():
    """Issue 38: an int4 load is its nibble, sign extended (uint4: as it is); a store converts to the low 4 bits and
    writes the nibble back into its byte (tl::int4_nibble_store, not atomic: packed_int_nibbles.py)."""
    _assert_lowers_to(int4_before, int4_expected)
