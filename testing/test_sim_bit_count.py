"""tl_sim::BitCount (src/tl_templates/sim/sim/bit_count.h), the inline population count behind `__popc`, `__popcll`
and the scheduler's thread sets (the simulator builds for baseline x86-64, where __builtin_popcount is a libgcc
call), against Python's count of set bits on edge and random 64-bit values."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

HEADERS = Path(__file__).resolve().parents[1] / "src" / "tl_templates" / "sim" / "sim"

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
    source, binary = tmp_path / "bit_count.cc", tmp_path / "bit_count"
    source.write_text(PROGRAM)
    subprocess.run(["g++", "-O2", "-march=x86-64", f"-I{HEADERS}", str(source), "-o", str(binary)], check=True)
    rng = random.Random(37)
    values = [0, 1, 2**63, 2**64 - 1, 2**32 - 1, 2**32, 0x5555555555555555, 0xAAAAAAAAAAAAAAAA]
    values += [1 << i for i in range(64)] + [rng.getrandbits(64) for _ in range(2000)]
    values += [rng.getrandbits(64) & rng.getrandbits(64) & rng.getrandbits(64) for _ in range(500)]  # sparse
    out = subprocess.run([str(binary)], input="\n".join(map(str, values)), capture_output=True, text=True,
                         check=True).stdout.split()
    assert [int(n) for n in out] == [bin(v).count("1") for v in values]
