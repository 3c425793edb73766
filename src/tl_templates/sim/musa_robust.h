/*!
 * \file tl_templates/sim/musa_robust.h
 * \brief The simulator's musa_robust.h: robust descriptors, which bound the bytes a robust load may read.
 *
 * `__musa::robust_ptr<T>(base, size_bytes)` describes the valid bytes [base, base + size_bytes); its
 * `get_v4_robust_addr()` (mp_31's robust built-ins) and `get_robust_addr()` (mp_22's) return the descriptor the
 * built-ins take (sim/async_copy.h): a robust load reads 0 for every byte outside that range, per byte [I].
 * mcc's descriptors are opaque register tuples (`robust_v4_addr_t`, the "3-word" `robust_addr_t`); here both hold
 * the range.
 */
#pragma once

#include <cstdint>

#pragma GCC visibility push(hidden)
namespace __musa {

/*! \brief mp_31's robust descriptor. */
struct robust_v4_addr_t {
  const void* base;
  uint64_t size;
};
/*! \brief mp_22's robust descriptor. */
struct robust_addr_t {
  const void* base;
  uint64_t size;
};

template <typename T>
class robust_ptr {
 public:
  robust_ptr(T* base, uint64_t size_bytes) : base_(base), size_(size_bytes) {}
  robust_v4_addr_t get_v4_robust_addr() const { return robust_v4_addr_t{base_, size_}; }
  robust_addr_t get_robust_addr() const { return robust_addr_t{base_, size_}; }

 private:
  const void* base_;
  uint64_t size_;
};

}  // namespace __musa

namespace tl_sim {

/*! \brief Whether the byte at `p` lies in the descriptor's range. */
template <typename Desc>
inline bool RobustCovers(const Desc& d, const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(d.base);
  return a >= base && a - base < d.size;
}

}  // namespace tl_sim
#pragma GCC visibility pop
