/*!
 * \file tl_templates/sim/sim/swizzle.h
 * \brief The shared-memory swizzle of mp_31's copy engine and SQMMA, written once for both.
 *
 * MUSA_LAYOUTS.md section 4: a byte at unswizzled shared address `a` lives at
 *   phys = a ^ (((a >> log2 line) & (stride / granularity - 1)) << log2 granularity)
 * with granularity < stride <= line (granularity 16, 32 or 64 B; stride 32..256 B; line 128 or 256 B). SQMMA's
 * swizzle (sqmma_descriptor.h) is the case stride = line = 256 B. Granularity 0 means no swizzle.
 */
#pragma once

#include <cstdint>

#pragma GCC visibility push(hidden)
namespace tl_sim {

inline constexpr uint32_t Log2(uint32_t power_of_two) { return static_cast<uint32_t>(__builtin_ctz(power_of_two)); }

/*! \brief The physical byte address of unswizzled address `a` (all sizes in bytes; granularity 0 = none). */
inline uint32_t SwizzledAddress(uint32_t a, uint32_t granularity, uint32_t stride, uint32_t line) {
  if (granularity == 0) return a;
  return a ^ (((a >> Log2(line)) & (stride / granularity - 1)) << Log2(granularity));
}

}  // namespace tl_sim
#pragma GCC visibility pop
