"""Sub-byte integer dtypes (T.int4, T.uint4, T.int2, T.uint2): names of packed quantized fields.

They behave as dtypes in Python (compare, `.bits`, `.as_torch()` gives their packed storage, int8/uint8 as upstream's
int4), so programs size and decode packed fields by them; a kernel cannot hold them (MUSA C has no 4- or 2-bit
integer), so a buffer, parameter or value of one is an error at the line that writes it; int4 / uint4 tensor
parameters and shared tiles excepted, as packed storage whose bytes only move (T.ptx_cp_async), an element access
an error when compiled.
"""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import UnsupportedError
from tilelang.quantize import _tir_packed_int_to_int_convert

ARCHES = ["musa -arch=mp_31", "musa -arch=mp_22"]
N = 64


def test_sub_byte_names_are_dtypes_with_packed_torch_storage():
    assert (T.int4.bits, T.uint4.bits, T.int2.bits, T.uint2.bits) == (4, 4, 2, 2)
    assert T.dtype("int4") == T.int4 and T.int4 == "int4" and T.int4 != T.int8
    assert T.int4 in [T.float16, T.int8, T.int4] and {T.int4: "i4"}[T.dtype("int4")] == "i4"
    assert (T.int4.as_torch(), T.uint4.as_torch(), T.uint2.as_torch()) == (torch.int8, torch.uint8, torch.uint8)


def test_c_integer_spellings_name_the_sized_dtypes():
    """T.dtype("uint") is T.uint (uint32), as upstream spells it: upstream's lop3 group checks `fmt in [T.int, T.uint]`."""
    assert [T.dtype(s) for s in ("uint", "short", "long", "ulong")] == [T.uint, T.short, T.long, T.uint64]
    assert T.dtype("uint") in [T.int, T.uint] and T.dtype("uint") == "uint32"


def _int4_fields_kernel(target):
    per = 8 // T.int4.bits

    @T.prim_func
    def main(P: T.Tensor((N,), T.int8), O: T.Tensor((N * per,), T.int32)):
        with T.Kernel(per, threads=N) as bx:
            tx = T.get_thread_binding(0)
            i = bx * N + tx
            O[i] = _tir_packed_int_to_int_convert("int", 8)(T.int4.bits, P[i // per], i % per, T.int32)

    return tilelang.compile(main, target=target)


@pytest.mark.parametrize("target", ARCHES)
def test_int4_fields_sized_by_the_name_decode_as_torch(target):
    kernel = _int4_fields_kernel(target)
    source = kernel.get_kernel_source()
    assert "signed char* __restrict__ P" in source  # the packed storage, never a 4-bit type
    assert "& 15) << 28) >> 28" in source  # a 4-bit field, sign-extended from bit 3
    g = torch.Generator().manual_seed(4)
    packed = torch.randint(-128, 128, (N,), generator=g, dtype=torch.int32).to(torch.int8)
    out = torch.full((2 * N,), -12345, dtype=torch.int32)  # poisoned (no NaN for integers): no field decodes to it
    kernel(packed, out)
    raw = packed.to(torch.int32) & 0xFF
    fields = torch.stack([raw & 0xF, raw >> 4], dim=-1).reshape(-1)
    expected = torch.where(fields >= 8, fields - 16, fields)
    torch.testing.assert_close(out, expected)


def _line_of(func, text):
    import inspect

    lines, first = inspect.getsourcelines(func)
    return first + next(k for k, line in enumerate(lines) if text in line)


def test_int4_fragment_is_an_error_at_its_line():
    def build():
        @T.prim_func
        def main(A: T.Tensor((16,), T.int8)):
            with T.Kernel(1, threads=16) as _:
                x = T.alloc_fragment((16,), T.int4)  # the line
                for i in T.Parallel(16):
                    A[i] = x[i]

        return main

    with pytest.raises(UnsupportedError, match=r"T.alloc_fragment: dtype `int4` is a sub-byte integer") as info:
        tilelang.compile(build(), target=ARCHES[0])
    assert info.value.loc.lineno == _line_of(build, "# the line")


def test_uint4_tensor_parameter_elements_are_read_as_nibbles():
    """A uint4 tensor parameter is packed storage (two a byte, element 2k low); an element read is its nibble
    (issue 38; more in test_int4_elements.py)."""
    def build():
        @T.prim_func
        def main(Packed: T.Tensor((16,), T.uint4), Out: T.Tensor((16,), T.uint8)):
            with T.Kernel(1, threads=16) as _:
                for i in T.Parallel(16):
                    Out[i] = T.cast(Packed[i], T.uint8)

        return main

    packed = torch.randint(0, 256, (8,), generator=torch.Generator().manual_seed(3), dtype=torch.uint8)
    out = torch.empty(16, dtype=torch.uint8)
    tilelang.compile(build(), target=ARCHES[0])(packed, out)
    assert torch.equal(out, torch.stack([packed & 15, packed >> 4], 1).reshape(-1))


def test_int2_tensor_parameter_is_an_error_naming_it():
    def build():
        @T.prim_func
        def main(Packed: T.Tensor((16,), T.int2)):
            with T.Kernel(1, threads=16) as _:
                T.evaluate(0)

        return main

    with pytest.raises(UnsupportedError, match=r"parameter `Packed`: dtype `int2` is a sub-byte integer"):
        tilelang.compile(build(), target=ARCHES[0])


def test_cast_to_int4_wraps_and_arithmetic_on_it_is_an_error_at_its_line():
    """A conversion to int4 keeps the low 4 bits (two's complement), as C's to a narrower integer (issue 38);
    computing with the int4 value is the error."""
    def build(arithmetic):
        @T.prim_func
        def main(A: T.Tensor((16,), T.int8), B: T.Tensor((16,), T.int32)):
            with T.Kernel(1, threads=16) as _:
                for i in T.Parallel(16):
                    if arithmetic:
                        B[i] = T.Cast("int32", T.int4(A[i]) + T.int4(1))  # the line
                    else:
                        B[i] = T.Cast("int32", T.int4(A[i]))

        return main

    a = torch.randint(-128, 128, (16,), generator=torch.Generator().manual_seed(4), dtype=torch.int8)
    b = torch.empty(16, dtype=torch.int32)
    tilelang.compile(build(False), target=ARCHES[0])(a, b)
    low = (a.to(torch.int32) & 15)
    assert torch.equal(b, low - 16 * (low >= 8).to(torch.int32))
    with pytest.raises(UnsupportedError, match=r"has dtype int4, a sub-byte integer") as info:
        build(True)
    assert info.value.loc.lineno == _line_of(build, "# the line")
