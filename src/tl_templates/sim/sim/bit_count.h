/*!
 * \file tl_templates/sim/sim/bit_count.h
 * \brief Population count without libgcc: the simulator builds for baseline x86-64 (no popcnt instruction), where
 *        __builtin_popcount becomes a call to libgcc's __popcountdi2; this is the same count inline.
 */
#pragma once

#include <cstdint>

namespace tl_sim {

/*! \brief The number of set bits of `x` (bit pairs, nibbles, then bytes summed by a multiply). */
inline uint32_t BitCount(uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555ull);
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
  return static_cast<uint32_t>((x * 0x0101010101010101ull) >> 56);
}

}  // namespace tl_sim
