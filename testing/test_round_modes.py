"""T.round(x, rounding_mode) and a unary math function's second (span) parameter, as upstream: upstream's T.round
takes "ties-to-even" (default, nearbyint) or "ties-away-from-zero" (C's round; its fast-math test calls
`T.round(x, "ties-away-from-zero")`), and every TVM unary op takes an optional `span` second argument."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison
from tilelang_musa.errors import CompileError

ARCHS = ["mp_31", "mp_22"]
HALVES = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 0.49999997, 7.5, 100.5, -100.5, 0.0, 4.0, -3.49, 2.25, -6.75]


def _away_from_zero(a: torch.Tensor) -> torch.Tensor:
    x = a.double()
    t = x.trunc()
    return torch.where((x - t).abs() >= 0.5, t + x.sign(), t).to(a.dtype)


def _rounding(dtype):
    @T.prim_func
    def main(A: T.Tensor((64,), dtype), Away: T.Tensor((64,), dtype), Even: T.Tensor((64,), dtype),
             E: T.Tensor((64,), dtype)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            Away[tx] = T.round(A[tx], "ties-away-from-zero")
            Even[tx] = T.round(A[tx])
            E[tx] = T.exp(A[tx], None)  # TVM's `span` parameter, passed positionally

    return main


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype,torch_dtype", [("float32", torch.float32), ("float16", torch.float16),
                                               ("bfloat16", torch.bfloat16)])
def test_round_modes(arch, dtype, torch_dtype):
    kernel = tilelang.compile(_rounding(dtype), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "roundf(" in source  # the halfway cases away from zero
    # ties to even: nearbyintf for float32, the half intrinsic hrint for float16/bfloat16 (as TVM's CUDA rules)
    even_call = "nearbyintf(A[" if dtype == "float32" else "hrint(A["
    assert f"Even[((int)threadIdx.x)] = {even_call}" in source or f"Even[(int)threadIdx.x] = {even_call}" in source, \
        source
    gen = torch.Generator().manual_seed(17)
    a = torch.cat([torch.tensor(HALVES), (torch.rand(48, generator=gen) - 0.5) * 20]).to(torch_dtype)
    away, even, e = (poison((64,), torch_dtype) for _ in range(3))
    kernel(a, away, even, e)
    torch.testing.assert_close(away, _away_from_zero(a), rtol=0, atol=0)
    assert torch.equal(even.view(torch.int16 if torch_dtype != torch.float32 else torch.int32),
                       torch.round(a).view(torch.int16 if torch_dtype != torch.float32 else torch.int32))
    torch.testing.assert_close(e.float(), torch.exp(a.float()).to(torch_dtype).float(), rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype,torch_dtype", [("float16", torch.float16), ("bfloat16", torch.bfloat16),
                                               ("float32", torch.float32)])
def test_vectorized_round_is_ties_to_even_lane_by_lane(arch, dtype, torch_dtype):
    """A vector of halves has no hrint: each lane rounds in float with nearbyintf, exactly torch.round. A float32
    vector calls nearbyintf lane by lane too (it printed C's roundf, halves away from zero, before)."""

    @T.prim_func
    def main(A: T.Tensor((256,), dtype), B: T.Tensor((256,), dtype)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            for k in T.vectorized(4):
                B[tx * 4 + k] = T.round(A[tx * 4 + k])

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    lanes = "tl::vec_of(" if dtype == "float32" else "tl::vec_cast<float>("
    assert "tl::vmath::nearbyintf(" + lanes in source and "roundf" not in source, source
    gen = torch.Generator().manual_seed(5)
    a = torch.cat([torch.tensor(HALVES * 4), (torch.rand(192, generator=gen) - 0.5) * 40]).to(torch_dtype)
    b = poison((256,), torch_dtype)
    kernel(a, b)
    bits = torch.int32 if dtype == "float32" else torch.int16
    assert torch.equal(b.view(bits), torch.round(a).view(bits))


def test_round_of_an_integer_is_itself_away_from_zero():
    i = T.int32(7)
    assert T.round(i, "ties-away-from-zero").same_as(i)


def test_bad_second_arguments_are_named_errors():
    with pytest.raises(ValueError, match="unsupported rounding_mode 'up'"):
        T.round(T.float32(1.5), "up")
    with pytest.raises(ValueError, match="T.exp takes one operand"):
        T.exp(T.float32(1.5), 2.0)

    def kernel():
        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=4):
                tx = T.get_thread_binding()
                A[tx] = T.sqrt(A[tx], A[tx])

    with pytest.raises(CompileError, match=r"T.sqrt takes one operand") as info:
        kernel()
    assert "A[tx] = T.sqrt(A[tx], A[tx])" in str(info.value) or "line" in str(info.value)
