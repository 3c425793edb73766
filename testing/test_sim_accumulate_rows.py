"""tl_sim::mma::AccumulateRows (src/tl_templates/sim/sim/mma_numerics.h), the matrix models' arithmetic: its AVX path
(four rows of 8 or 16 lanes, taken where the CPU has AVX), its SSE path and AccumulateRowsWide's AVX-512 path (eight
rows of 16 lanes, the SQMMA model's, where the CPU has AVX-512F) give bit for bit what a scalar loop gives,
product and sum each rounded to fp32 in k order, with and without the simulator's fast-math flags."""

from __future__ import annotations

import pytest

from tilelang_musa.jit.toolchains import SIM_FAST_MATH_FLAGS

from sim_build import run_header_program

PROGRAM = r"""
#include <cstdio>
#include <cstring>
#include <random>
#include "mma_numerics.h"
using tl_sim::mma::AccumulateRows;
using tl_sim::mma::AccumulateRowsWide;

int main() {
  std::mt19937 rng(37);
  std::uniform_real_distribution<float> mantissa(-1.f, 1.f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  auto draw = [&] { return std::ldexp(mantissa(rng), exponent(rng)); };
  const unsigned shapes[][3] = {{4, 16, 32}, {8, 32, 16}, {6, 8, 64}, {5, 24, 8}, {2, 8, 16}, {7, 12, 4},
                                 {8, 16, 64}, {13, 48, 16}, {16, 64, 8}};
  int mismatches = 0;
  for (auto [rows, count, depth] : shapes) {
    const unsigned stride = count + 8, acc_stride = count + 4, a_stride = depth + 2;
    std::vector<float> a(rows * a_stride), b(depth * stride), c(rows * acc_stride);
    for (float& v : a) v = draw();
    for (float& v : b) v = draw();
    for (float& v : c) v = draw();
    std::vector<float> scalar = c, sse = c, wide = c, widest = c;
    for (unsigned i = 0; i < rows; ++i)
      for (unsigned j = 0; j < count; ++j) {
        volatile float s = scalar[i * acc_stride + j];  // volatile: each product and sum stored as fp32
        for (unsigned k = 0; k < depth; ++k) {
          volatile float p = a[i * a_stride + k] * b[k * stride + j];
          s = s + p;
        }
        scalar[i * acc_stride + j] = s;
      }
    AccumulateRows(sse.data(), acc_stride, a.data(), a_stride, rows, b.data(), depth, stride, count, 4);
    AccumulateRows(wide.data(), acc_stride, a.data(), a_stride, rows, b.data(), depth, stride, count);
    AccumulateRowsWide(widest.data(), acc_stride, a.data(), a_stride, rows, b.data(), depth, stride, count);
    mismatches += std::memcmp(sse.data(), scalar.data(), c.size() * 4) != 0;
    mismatches += std::memcmp(wide.data(), scalar.data(), c.size() * 4) != 0;
    mismatches += std::memcmp(widest.data(), scalar.data(), c.size() * 4) != 0;
  }
  std::printf("mismatches %d avx %d avx512 %d\n", mismatches, int(tl_sim::mma::CpuHasAvx()),
              int(tl_sim::mma::CpuHasAvx512()));
}
"""


@pytest.mark.parametrize("fast_math", [False, True])
def test_avx_and_sse_paths_equal_the_scalar_sum_bit_for_bit(tmp_path, fast_math):
    out = run_header_program(PROGRAM, tmp_path, flags=("-O1", *(SIM_FAST_MATH_FLAGS if fast_math else ())))
    assert out[:2] == ["mismatches", "0"], out
