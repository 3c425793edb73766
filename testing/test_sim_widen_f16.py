"""tl_sim::WidenF16 (src/tl_templates/sim/sim/float_convert.h), how the SQMMA model widens binary16 operands: its F16C
path (eight at a time, taken where the CPU has F16C) gives bit for bit what WidenToFloat gives for every one of the
65536 patterns, signalling NaNs included (the instruction would quiet them), wherever a pattern sits in a group."""

from __future__ import annotations

from sim_build import run_header_program

PROGRAM = r"""
#include <cstdio>
#include <cstring>
#include <vector>
#include "float_convert.h"

int main() {
  int mismatches = 0;
  for (unsigned offset = 0; offset < 3; ++offset) {  // each pattern at another lane of its group, and a tail
    std::vector<uint16_t> raw(65536 + offset);
    for (unsigned i = 0; i < raw.size(); ++i) raw[i] = static_cast<uint16_t>(i >= offset ? i - offset : 0x3c00);
    std::vector<float> out(raw.size(), -1.0f);
    tl_sim::WidenF16(raw.data(), out.data(), raw.size());
    for (unsigned i = 0; i < raw.size(); ++i) {
      const float want = tl_sim::WidenToFloat<5, 10>(raw[i]);
      mismatches += std::memcmp(&want, &out[i], sizeof(float)) != 0;
    }
  }
#if defined(__x86_64__)
  const int f16c = tl_sim::CpuHasF16c();
#else
  const int f16c = 0;
#endif
  std::printf("mismatches %d f16c %d\n", mismatches, f16c);
}
"""


def test_widen_f16_equals_widen_to_float_for_every_pattern(tmp_path):
    out = run_header_program(PROGRAM, tmp_path)
    assert out[:2] == ["mismatches", "0"], out
