"""T.float4_e2m1fnx2, upstream's packed fp4 pair: a dtype name with upstream's properties (4 bits, 2 lanes,
is_float4, torch.float4_e2m1fn_x2). Tensors and buffers of it are a named error saying to declare float4_e2m1fn
with the last dimension doubled, the same bytes; a torch.float4_e2m1fn_x2 tensor is passed to such a kernel as it
is, and decodes as torch's E2M1 (low nibble first)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison
from tilelang_musa.errors import UnsupportedError

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def test_dtype_properties_match_upstream():
    pair = T.float4_e2m1fnx2
    assert (pair.bits, pair.lanes) == (4, 2) and str(pair) == "float4_e2m1fnx2"
    assert pair.is_float4() and T.float4_e2m1fn.is_float4() and not T.float16.is_float4()
    assert pair.as_torch() is getattr(torch, "float4_e2m1fn_x2", torch.uint8)
    assert T.float4_e2m1fn.as_torch() is pair.as_torch()  # upstream's: the packed pair holds fp4 storage


def test_resolve_torch_storage_dtype_as_upstream():
    from tilelang.language.dtypes import resolve_torch_storage_dtype

    assert resolve_torch_storage_dtype(T.float16) == T.float16
    assert resolve_torch_storage_dtype(T.int4) == T.int8
    expected = T.float4_e2m1fnx2 if hasattr(torch, "float4_e2m1fn_x2") else T.int8
    assert resolve_torch_storage_dtype(T.float4_e2m1fn) == expected


@pytest.mark.parametrize("where", ["param", "shared", "empty"])
def test_tensors_of_pairs_are_a_named_error(where):
    with pytest.raises(UnsupportedError, match=r"float4_e2m1fnx2.*declare `float4_e2m1fn` with the last dimension "
                                               r"doubled"):
        if where == "param":
            @T.prim_func
            def main(A: T.Tensor((4, 8), T.float4_e2m1fnx2)):
                with T.Kernel(1, threads=32):
                    T.evaluate(0)
        elif where == "shared":
            @T.prim_func
            def main(A: T.Tensor((4, 16), T.float4_e2m1fn)):
                with T.Kernel(1, threads=32):
                    T.alloc_shared((4, 8), T.float4_e2m1fnx2)
        else:
            @T.prim_func
            def main():
                out = T.empty((3, 16), T.float4_e2m1fnx2)
                with T.Kernel(1, threads=1):
                    T.evaluate(0)
                return out


@pytest.mark.skipif(not hasattr(torch, "float4_e2m1fn_x2"), reason="this torch has no float4_e2m1fn_x2")
@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_torch_pairs_feed_an_fp4_kernel(arch):
    @T.prim_func
    def decode(A: T.Tensor((4, 16), T.float4_e2m1fn), B: T.Tensor((4, 16), T.float32)):
        with T.Kernel(1, threads=64):
            for i, j in T.Parallel(4, 16):
                B[i, j] = T.cast(A[i, j], "float32")

    kernel = tilelang.compile(decode, target=f"musa -arch={arch}")
    g = torch.Generator().manual_seed(81)
    raw = torch.randint(0, 256, (4, 8), generator=g, dtype=torch.uint8)
    packed = raw.view(torch.float4_e2m1fn_x2)  # torch's packed pairs: 8 bytes a row, 16 fp4 values
    b = poison((4, 16), torch.float32)
    kernel(packed, b)
    nibbles = torch.stack([raw & 0xF, raw >> 4], dim=-1).reshape(4, 16).long()  # low nibble first
    expected = torch.tensor(E2M1)[nibbles & 7] * torch.where(nibbles >= 8, -1.0, 1.0)
    torch.testing.assert_close(b, expected, rtol=0, atol=0)


def fp4_codes(values):
    """The E2M1 code of each value (values among +-E2M1; -0.0 has the sign bit)."""
    magnitude = torch.tensor([E2M1.index(abs(v)) for v in values.flatten().tolist()], dtype=torch.uint8)
    return (magnitude | torch.where(values.flatten().signbit(), 8, 0).to(torch.uint8)).reshape(values.shape)


@pytest.mark.skipif(not hasattr(torch, "float4_e2m1fn_x2"), reason="this torch has no float4_e2m1fn_x2")
@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
def test_fp4_outputs_come_back_as_torch_pairs_and_feed_a_kernel(arch):
    """An fp4 output (out_idx) is a torch.float4_e2m1fn_x2 tensor, as upstream main's adapters return it (its
    bytes the packed pairs, low nibble first); passed back, it decodes to the encoded values."""
    @T.prim_func
    def encode(A: T.Tensor((4, 16), T.float32), B: T.Tensor((4, 16), T.float4_e2m1fn)):
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(4, 16):
                B[i, j] = T.cast(A[i, j], T.float4_e2m1fn)

    @T.prim_func
    def decode(A: T.Tensor((4, 16), T.float4_e2m1fn), B: T.Tensor((4, 16), T.float32)):
        with T.Kernel(1, threads=64):
            for i, j in T.Parallel(4, 16):
                B[i, j] = T.cast(A[i, j], "float32")

    g = torch.Generator().manual_seed(82)
    values = torch.tensor(E2M1)[torch.randint(0, 8, (4, 16), generator=g)] * \
        torch.where(torch.rand(4, 16, generator=g) < 0.5, -1.0, 1.0)
    packed = tilelang.compile(encode, out_idx=[1], target=f"musa -arch={arch}")(values)
    assert packed.dtype == torch.float4_e2m1fn_x2 and packed.shape == (4, 8)
    codes = fp4_codes(values)
    assert torch.equal(packed.view(torch.uint8), codes[:, 0::2] | (codes[:, 1::2] << 4))
    decoded = tilelang.compile(decode, out_idx=[1], target=f"musa -arch={arch}")(packed)
    torch.testing.assert_close(decoded, values, rtol=0, atol=0)
