"""tl_sim::BitCount (src/tl_templates/sim/sim/bit_count.h), the inline population count behind `__popc`, `__popcll`
and the scheduler's thread sets (the simulator builds for baseline x86-64, where __builtin_popcount is a libgcc
call), against Python's count of set bits on edge and random 64-bit values."""

from __future__ import annotations

import random

from sim_build import run_header_program

PROGRAM = r"""
#include <cstdio>
#include <cinttypes>
#include "bit_count.h"
int main() {
  uint64_t x;
  while (std::scanf("%" SCNu64, &x) == 1) std::printf("%u\n", tl_sim::BitCount(x));
}
"""


def test_bit_count_matches_python_on_edge_and_random_values(tmp_path):
    rng = random.Random(37)
    values = [0, 1, 2**63, 2**64 - 1, 2**32 - 1, 2**32, 0x5555555555555555, 0xAAAAAAAAAAAAAAAA]
    values += [1 << i for i in range(64)] + [rng.getrandbits(64) for _ in range(2000)]
    values += [rng.getrandbits(64) & rng.getrandbits(64) & rng.getrandbits(64) for _ in range(500)]  # sparse
    out = run_header_program(PROGRAM, tmp_path, flags=("-O2",), stdin="\n".join(map(str, values)))
    assert [int(n) for n in out] == [bin(v).count("1") for v in values]
