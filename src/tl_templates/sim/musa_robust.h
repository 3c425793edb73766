/*!
 * \file tl_templates/sim/musa_robust.h
 * \brief The simulator's musa_robust.h: robust descriptors, which bound the bytes a robust load may read
 *        (declared in decl/musa_robust_decl.h, shared with the device-compiler check; the robust built-ins that
 *        take them are sim/async_copy.h's), hidden, and the range test the built-ins use.
 */
#pragma once

#include <cstdint>

#include "sim/keywords.h"

#pragma GCC visibility push(hidden)
#include "decl/musa_robust_decl.h"

namespace tl_sim {

/*! \brief Whether the byte at `p` lies in the descriptor's range. */
template <typename Desc>
inline bool RobustCovers(const Desc& d, const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(d.base);
  return a >= base && a - base < d.size;
}

}  // namespace tl_sim
#pragma GCC visibility pop
