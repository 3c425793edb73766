"""`a * b + c` in the simulator rounds the product, then the sum (-ffp-contract=off on every host): the host compiler
would otherwise fuse it into one fma where the host has one (g++'s default for GNU C++ on aarch64, or x86 with FMA),
and the same kernel would give different bits on different machines. mcc, like nvcc, contracts by default on the
card, so a float32 `a * b + c` may differ from the card's in the last bit (docs/SIMULATOR.md)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand
from tilelang_musa.jit import sim_runtime_recipe
from tilelang_musa.jit.toolchains import include_root, simulator_headers

ARCHS = ["mp_31", "mp_22"]


def multiply_add(n):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32"),
             Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(n):
                Y[i] = A[i] * B[i] + C[i]

    return main


def test_every_simulator_build_turns_contraction_off():
    flags = sim_runtime_recipe.base_flags(310, include_root(), simulator_headers(), [])
    assert "-ffp-contract=off" in flags


@pytest.mark.parametrize("arch", ARCHS)
def test_a_multiply_add_rounds_twice(arch):
    kernel = tilelang.compile(multiply_add(64), target=f"musa -arch={arch}")
    assert "fma" not in kernel.get_kernel_source()  # the printer writes a * b + c; the contraction is mcc's
    a, b, c = (rand((64,), torch.float32, seed) for seed in (41, 42, 43))
    # (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24: the product rounds to 1 + 2^-11 (a tie, to even), so the sum is 0;
    # one fused rounding would keep 2^-24
    a[0] = b[0] = 1 + 2.0 ** -12
    c[0] = -(1 + 2.0 ** -11)
    y = poison((64,), torch.float32)
    kernel(a, b, c, y)
    assert y[0].item() == 0.0
    assert torch.equal(y, a * b + c)  # torch's CPU a * b + c: two roundings too
