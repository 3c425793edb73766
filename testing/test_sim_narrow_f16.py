"""tl_sim::NarrowFromFloat<5, 10> (src/tl_templates/sim/sim/float_convert.h), how a simulated kernel rounds float to
binary16 (`half_t(x)`): its F16C path (vcvtps2ph, taken where the CPU has F16C) gives bit for bit what the portable
NarrowRne gives. All 2^32 floats were compared once when it was written (benchmark/RESULTS.md); this test checks
every sign, exponent and low-13-bit rounding pattern (the bits the rounding reads), a prime-stride sweep of the
rest, and the special values (zeros, subnormals, infinities, quiet and signalling NaNs)."""

from __future__ import annotations

from sim_build import run_header_program

PROGRAM = r"""
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include "float_convert.h"

static unsigned long long checked = 0, mismatches = 0;

static void Check(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  const uint16_t got = tl_sim::NarrowFromFloat<5, 10>(f), want = tl_sim::NarrowRne<5, 10>(f);
  ++checked;
  if (got != want && ++mismatches <= 5) std::fprintf(stderr, "%08x: %04x, want %04x\n", bits, got, want);
}

int main() {
  for (uint32_t top = 0; top < 512; ++top)        // sign and exponent
    for (uint32_t low = 0; low < 8192; ++low)     // the 13 mantissa bits below binary16's ten
      for (uint32_t upper : {0u, 0x155u, 0x3ffu})  // three patterns of the ten kept bits
        Check((top << 23) | (upper << 13) | low);
  for (uint64_t i = 0; i < (1ull << 32); i += 65521) Check(static_cast<uint32_t>(i));
  for (uint32_t special : {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x7f800000u, 0xff800000u,
                           0x7fc00000u, 0xffc00001u, 0x7f800001u, 0xff80ffffu, 0x7fbfffffu, 0x477ff000u,
                           0x477fefffu, 0x33000000u, 0x33000001u, 0xb3000000u})
    Check(special);
#if defined(__x86_64__)
  const int f16c = tl_sim::kNarrowWithF16c;
#else
  const int f16c = 0;
#endif
  std::printf("mismatches %llu checked %llu f16c %d\n", mismatches, checked, f16c);
}
"""


def test_narrow_from_float_equals_narrow_rne(tmp_path):
    out = run_header_program(PROGRAM, tmp_path)
    assert out[:2] == ["mismatches", "0"], out
    assert int(out[3]) > 12_000_000, out
