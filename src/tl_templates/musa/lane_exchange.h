/*!
 * \file tl_templates/musa/lane_exchange.h
 * \brief `tl::exchange_lane_bits`: lanes of a warp trade register slots so that each ends up holding consecutive
 *        elements (tileop/lane_exchange.py chooses the trades; a fragment store then writes vectors).
 *
 * A matrix accumulator puts consecutive columns on consecutive lanes (SQMMA: lane l holds columns l % 8 + 8 v), so a
 * direct store writes one element per lane and instruction. Trading lane bit b against slot bit i between the lanes
 * L and L ^ (1 << b) makes slot bit i walk what lane bit b walked: afterwards slot p of lane L holds what slot
 * p' of lane L' held, where L' is L with bit b set to bit i of p, and p' is p with bit i set to bit b of L. Each
 * lane sends half of its slots (those whose bit i differs from its own bit b), packed into 32-bit shuffle words.
 */
#pragma once

#include "common.h"

namespace tl {

/*!
 * \brief For each i with kLaneBits[i] >= 0 (in order): trade lane bit kLaneBits[i] against bit i of the slot index
 *        of `values` (N slots). `lane` is the thread's lane (its linear id modulo the warp size). Every lane of the
 *        warp must call it with the same N and bits. Lane bits stay below 5: shuffles reach within 32 lanes, which
 *        is all of a warp on mp_31 and a verified reach on mp_22's 128-lane warps (MUSA_FACTS.md).
 */
template <int N, int... kLaneBits, typename T>
TL_DEVICE void exchange_lane_bits(T* values, int lane) {
  constexpr int kLaneBitList[] = {kLaneBits...};
  static_assert(sizeof(T) <= 4, "lane exchanges move elements of at most 4 bytes");
  static_assert(N % (1 << sizeof...(kLaneBits)) == 0, "the traded slot bits must lie inside the array");
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof...(kLaneBits)); ++i) {
    const int lane_bit = kLaneBitList[i];
    if (lane_bit < 0) continue;  // slot bit i already walks consecutive elements: nothing to trade
    const int step = 1 << i;
    const bool high = (lane >> lane_bit) & 1;
    // The pairs (p, p + step) with bit i of p clear, in order m = 0 .. N/2 - 1; kPack of them share a shuffle word.
    constexpr int kPack = sizeof(T) < 4 && (N / 2) % (4 / sizeof(T)) == 0 ? 4 / sizeof(T) : 1;
#pragma unroll
    for (int m0 = 0; m0 < N / 2; m0 += kPack) {
      T sent[kPack];
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        const int m = m0 + k;
        const int low = (m / step) * 2 * step + m % step;
        sent[k] = high ? values[low] : values[low + step];
      }
      unsigned int word = 0;
      __builtin_memcpy(&word, sent, sizeof(sent));
      word = __shfl_xor_sync(0xffffffffu, word, 1 << lane_bit, 32);
      T received[kPack];
      __builtin_memcpy(received, &word, sizeof(received));
#pragma unroll
      for (int k = 0; k < kPack; ++k) {
        const int m = m0 + k;
        const int low = (m / step) * 2 * step + m % step;
        if (high) {
          values[low] = received[k];
        } else {
          values[low + step] = received[k];
        }
      }
    }
  }
}

}  // namespace tl
