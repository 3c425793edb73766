"""`T.call_extern(T.float16, "__float2half_rz", x)` and its `_rd` / `_ru` / bfloat16 siblings, the device API's
directed conversions (DeepSeek TileKernels' per_token_cast_to_e5m6 truncates through `__float2half_rz`): the
simulator had only `_rn`, a build error. Checked against every representable value: toward zero, down and up pick
the nearest 16-bit value on that side, beyond the largest finite one only when rounding away from zero."""

import pytest
import torch

import tilelang
import tilelang.language as T

N = 512
DIRECTIONS = {"rz": 0, "rd": -1, "ru": 1}


def directed_reference(x: torch.Tensor, dtype: torch.dtype, direction: int) -> torch.Tensor:
    """The 16-bit value on `direction`'s side of each float32 (0: toward zero), from the sorted list of all of them
    (infinities included: rounding down past the most negative finite value is -inf, toward zero never is)."""
    codes = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).view(dtype).float()
    grid = torch.unique(codes[~torch.isnan(codes)])  # ascending, -inf .. +inf, one zero
    below = grid[(torch.searchsorted(grid, x, right=True) - 1).clamp(min=0)]  # the largest value <= x
    above = grid[torch.searchsorted(grid, x).clamp(max=len(grid) - 1)]  # the smallest value >= x
    if direction < 0:
        return below
    if direction > 0:
        return above
    return torch.where(x >= 0, below, above)


def inputs() -> torch.Tensor:
    g = torch.Generator().manual_seed(21)
    x = torch.cat([torch.randn(N - 12, generator=g) * torch.logspace(-9, 6, N - 12),
                   torch.tensor([0.0, -0.0, 1.0, -1.0, 65504.0, 65519.0, 65520.0, 1e6, -1e6, 1e-10, -1e-10, 3.0e38])])
    return x.float()


@pytest.mark.parametrize("arch", ["mp_31", "mp_22"])
@pytest.mark.parametrize("mode", list(DIRECTIONS))
@pytest.mark.parametrize("dtype,fn", [(torch.float16, "__float2half"), (torch.bfloat16, "__float2bfloat16")])
def test_directed_conversions(arch, mode, dtype, fn):
    tl_dtype = T.float16 if dtype == torch.float16 else T.bfloat16

    @T.prim_func
    def main(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), tl_dtype)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(N):
                Y[i] = T.call_extern(tl_dtype, f"{fn}_{mode}", X[i])

    kernel = tilelang.compile(main, target=f"musa -arch={arch}")
    assert f"{fn}_{mode}(X[" in kernel.get_kernel_source()
    x = inputs()
    y = torch.full((N,), float("nan"), dtype=dtype)
    kernel(x, y)
    torch.testing.assert_close(y.float(), directed_reference(x, dtype, DIRECTIONS[mode]), rtol=0, atol=0)
