"""T.reduce_max / min / absmax on rows of -inf only, +inf only, NaN among numbers, NaN only and zeros of both signs,
over several layouts and thread counts (a row in one thread, across a warp's lanes, across warps through shared
memory), on both arches.

The rules (upstream 0.1.13's: src/backend/common/op/reduce.h MakeInitValue, tl_templates/cuda fast_max = fmaxf):
the fold starts from -inf for max, +inf for min, 0 for absmax (integers: their limits), so a row of -inf reduces
to -inf (not -FLT_MAX); a NaN loses to a number, in the thread's own fold (`tl::max`) as across threads
(`tl::MaxOp`), so a row of NaN only gives the identity; with nan_propagate=True a NaN wins (torch's amax/amin). Equal
zeros: +0 is above -0, whichever thread holds which."""

import pytest
import torch

import tilelang
import tilelang.language as T

# (rows, row length, threads): rows spread over the threads differently
LAYOUTS = [(16, 8, 32), (8, 64, 128), (4, 256, 256)]


def three_reductions(M, N, threads, nan_propagate, dtype="float32"):
    @T.prim_func
    def extremes(A: T.Tensor((M, N), dtype), Mx: T.Tensor((M,), dtype), Mn: T.Tensor((M,), dtype),
                 Ab: T.Tensor((M,), dtype)):
        with T.Kernel(1, threads=threads):
            F = T.alloc_fragment((M, N), dtype)
            mx = T.alloc_fragment((M,), dtype)
            mn = T.alloc_fragment((M,), dtype)
            ab = T.alloc_fragment((M,), dtype)
            T.copy(A, F)
            T.reduce_max(F, mx, dim=1, nan_propagate=nan_propagate)
            T.reduce_min(F, mn, dim=1, nan_propagate=nan_propagate)
            T.reduce_absmax(F, ab, dim=1, nan_propagate=nan_propagate)
            T.copy(mx, Mx)
            T.copy(mn, Mn)
            T.copy(ab, Ab)

    return extremes


def special_rows(M, N, seed):
    """Random rows, with the special ones among them (each special row twice, at different positions)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn((M, N), generator=g)
    inf, nan = float("inf"), float("nan")
    specials = [
        torch.full((N,), -inf),                                   # a fully masked row
        torch.full((N,), inf),
        torch.where(torch.arange(N) % 3 == 0, -inf, torch.randn(N, generator=g)),
        torch.where(torch.arange(N) == N - 1, nan, torch.randn(N, generator=g)),  # NaN folded last
        torch.where(torch.arange(N) == 0, nan, torch.randn(N, generator=g)),      # NaN folded first
        torch.full((N,), nan),
        torch.where(torch.arange(N) % 2 == 0, -0.0, 0.0),        # zeros of both signs
        torch.full((N,), -0.0),
    ]
    rows = torch.randperm(M, generator=g)
    for k, row in enumerate(rows.tolist()):
        if k < 2 * len(specials):
            a[row] = specials[k % len(specials)]
    return a


def expected(a, nan_propagate):
    if nan_propagate:
        return a.amax(1), a.amin(1), a.abs().amax(1)
    nan = torch.isnan(a)
    inf = float("inf")
    return (torch.where(nan, -inf, a).amax(1), torch.where(nan, inf, a).amin(1),
            torch.where(nan, 0.0, a.abs()).amax(1))


def check(kernel, M, N, nan_propagate, seed, dtype=torch.float32):
    a = special_rows(M, N, seed).to(dtype)
    got = kernel(a)
    for name, g, e in zip(("max", "min", "absmax"), got, expected(a, nan_propagate)):
        torch.testing.assert_close(g, e, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"reduce_{name}: {m}")
    # zeros: +0 above -0, whatever thread holds which (torch leaves the sign of an equal zero unspecified)
    zeros = (a == 0).all(1)
    mixed = zeros & torch.signbit(a).any(1) & ~torch.signbit(a).all(1)
    assert not torch.signbit(got[0][mixed]).any() and torch.signbit(got[1][mixed]).all()
    negative = zeros & torch.signbit(a).all(1)
    assert torch.signbit(got[0][negative]).all() and torch.signbit(got[1][negative]).all()
    assert not torch.signbit(got[2][zeros]).any()


@pytest.mark.parametrize("arch", ["mp_22", "mp_31"])
@pytest.mark.parametrize("M, N, threads", LAYOUTS)
def test_reductions_of_infinite_nan_and_zero_rows_match_torch_in_every_layout(arch, M, N, threads):
    kernel = tilelang.compile(three_reductions(M, N, threads, False), out_idx=[1, 2, 3], target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "_partial[0] = -tl::infinity<float>();" in source  # the identities
    assert "_partial[0] = tl::infinity<float>();" in source
    assert "3.402823" not in source  # not FLT_MAX
    check(kernel, M, N, False, seed=M * 1000 + threads)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_rows_reduce_the_same_way(dtype):
    M, N, threads = LAYOUTS[1]
    kernel = tilelang.compile(three_reductions(M, N, threads, False, dtype), out_idx=[1, 2, 3],
                              target="musa -arch=mp_31")
    assert "_partial[0] = -tl::infinity<" in kernel.get_kernel_source()
    check(kernel, M, N, False, seed=3, dtype=getattr(torch, dtype))


@pytest.mark.parametrize("arch, layout", [("mp_22", LAYOUTS[1]), ("mp_31", LAYOUTS[2])])
def test_nan_propagate_matches_torch_amax_amin(arch, layout):
    M, N, threads = layout
    kernel = tilelang.compile(three_reductions(M, N, threads, True), out_idx=[1, 2, 3], target=f"musa -arch={arch}")
    check(kernel, M, N, True, seed=7)


def test_integer_reductions_start_from_the_types_limits():
    @T.prim_func
    def int_extremes(A: T.Tensor((8, 64), "int32"), Mx: T.Tensor((8,), "int32"), Mn: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((8, 64), "int32")
            mx = T.alloc_fragment((8,), "int32")
            mn = T.alloc_fragment((8,), "int32")
            T.copy(A, F)
            T.reduce_max(F, mx, dim=1)
            T.reduce_min(F, mn, dim=1)
            T.copy(mx, Mx)
            T.copy(mn, Mn)

    kernel = tilelang.compile(int_extremes, out_idx=[1, 2], target="musa -arch=mp_31")
    a = torch.randint(-1000, 1000, (8, 64), dtype=torch.int32)
    a[0] = -2**31
    a[1] = 2**31 - 1
    mx, mn = kernel(a)
    torch.testing.assert_close(mx, a.amax(1))
    torch.testing.assert_close(mn, a.amin(1))
