"""`T.max` / `T.min` (tl::max / tl::min, common.h's detail::extremum) bit for bit on the corner cases: a NaN
operand loses (fmax / fmin), two NaNs give the second operand's bits, -0 orders below +0 whichever side it is on,
and the infinities order as numbers. Every ordered pair of the corner values plus fresh random pairs, on mp_22 and
mp_31, for float32, float64, float16 and bfloat16 (compared through float, returned as the operand's own bits)."""

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand

ARCHS = ("mp_22", "mp_31")
# dtype -> (torch dtype, unsigned bits dtype, the bits of a second, negative NaN with another payload)
DTYPES = {
    "float32": (torch.float32, np.uint32, 0xFFC00001),
    "float64": (torch.float64, np.uint64, 0xFFF8000000000001),
    "float16": (torch.float16, np.uint16, 0xFE01),
    "bfloat16": (torch.bfloat16, np.uint16, 0xFFC1),
}
SIGNED_BITS = {np.uint16: torch.int16, np.uint32: torch.int32, np.uint64: torch.int64}
THREADS = 128


def extremum_program(n: int, dtype: str):
    @T.prim_func
    def extremum(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), Max: T.Tensor((n,), dtype),
                 Min: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, THREADS), threads=THREADS) as bx:
            for i in T.Parallel(THREADS):
                Max[bx * THREADS + i] = T.max(A[bx * THREADS + i], B[bx * THREADS + i])
                Min[bx * THREADS + i] = T.min(A[bx * THREADS + i], B[bx * THREADS + i])

    return extremum


def as_bits(x: torch.Tensor, unsigned) -> np.ndarray:
    return x.view(SIGNED_BITS[unsigned]).numpy().view(unsigned)


def from_bits(bits: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    return torch.from_numpy(bits.view(np.dtype(bits.dtype.str.replace("u", "i")))).view(dtype)


def corner_pairs(dtype: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Every ordered pair of NaN, another NaN, +0, -0, +inf, -inf, 1.5 and -2, then fresh random pairs (some
    repeated, so equal values meet), padded to whole blocks."""
    torch_dtype, unsigned, other_nan = DTYPES[dtype]
    corners = torch.tensor([float("nan"), 0.0, -0.0, float("inf"), float("-inf"), 1.5, -2.0], dtype=torch_dtype)
    corners = torch.cat([corners, from_bits(np.array([other_nan], dtype=unsigned), torch_dtype)])
    a, b = corners.repeat_interleave(len(corners)), corners.repeat(len(corners))
    count = 2 * THREADS - len(a)
    ra, rb = rand((count,), torch_dtype, seed=11), rand((count,), torch_dtype, seed=12)
    rb[::4] = ra[::4]  # equal operands
    return torch.cat([a, ra]), torch.cat([b, rb])


def expected_bits(a: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray, is_max: bool) -> np.ndarray:
    """The rule on the operands' bits (a, b) and their values as float64 (x, y)."""
    larger = x > y if is_max else x < y
    smaller = x < y if is_max else x > y
    equal = np.where(x == y, (a & b) if is_max else (a | b), 0)
    return np.select([larger, smaller, x == y, np.isnan(x)], [a, b, equal, b], default=a).astype(a.dtype)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_max_min_corner_cases_bit_exact(arch, dtype):
    torch_dtype, unsigned, _ = DTYPES[dtype]
    a, b = corner_pairs(dtype)
    kernel = tilelang.compile(extremum_program(len(a), dtype), out_idx=[2, 3], target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl::max(" in source and "tl::min(" in source
    got_max, got_min = kernel(a, b)
    ab, bb = as_bits(a, unsigned), as_bits(b, unsigned)
    x, y = a.double().numpy(), b.double().numpy()
    for got, is_max in ((got_max, True), (got_min, False)):
        want = expected_bits(ab, bb, x, y, is_max)
        wrong = np.flatnonzero(as_bits(got, unsigned) != want)
        assert wrong.size == 0, [(hex(ab[i]), hex(bb[i]), hex(as_bits(got, unsigned)[i]), hex(want[i]))
                                 for i in wrong[:8]]


def test_the_rule_on_named_cases():
    """The reference above, spelled out on float32 for the cases the rule names."""
    nan, other_nan = np.uint32(0x7FC00000), np.uint32(0xFFC00001)
    pos, neg, one, inf = np.uint32(0), np.uint32(0x80000000), np.uint32(0x3F800000), np.uint32(0x7F800000)
    cases = [  # a, b, max, min
        (nan, one, one, one), (one, nan, one, one), (nan, other_nan, other_nan, other_nan),
        (pos, neg, pos, neg), (neg, pos, pos, neg), (inf, one, inf, one), (nan, inf, inf, inf),
    ]
    a, b = (np.array([c[k] for c in cases], dtype=np.uint32) for k in (0, 1))
    x, y = a.view(np.float32).astype(np.float64), b.view(np.float32).astype(np.float64)
    assert (expected_bits(a, b, x, y, True) == [c[2] for c in cases]).all()
    assert (expected_bits(a, b, x, y, False) == [c[3] for c in cases]).all()
