/*!
 * \file tl_templates/sim/decl/musa_robust_decl.h
 * \brief musa_robust.h's robust descriptors, declared once for the simulator (../musa_robust.h) and the
 *        device-compiler check (testing/device_compilers/musa_robust_decl.h, which adds the built-ins' shims).
 *
 * `__musa::robust_ptr<T>(base, size_bytes)` describes the valid bytes [base, base + size_bytes); its
 * `get_v4_robust_addr()` (mp_31's robust built-ins) and `get_robust_addr()` (mp_22's) return the descriptor the
 * built-ins take: a robust load reads 0 for every byte outside that range, per byte [I]. mcc's descriptors are
 * opaque register tuples (`robust_v4_addr_t`, the "3-word" `robust_addr_t`); here both hold the range. The includer
 * defines `__host__` and `__device__` (the simulator as nothing, sim/keywords.h).
 */
#pragma once

#include <stdint.h>

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
  __host__ __device__ robust_ptr(T* base, uint64_t size_bytes) : base_(base), size_(size_bytes) {}
  __host__ __device__ robust_v4_addr_t get_v4_robust_addr() const { return robust_v4_addr_t{base_, size_}; }
  __host__ __device__ robust_addr_t get_robust_addr() const { return robust_addr_t{base_, size_}; }

 private:
  const void* base_;
  uint64_t size_;
};

}  // namespace __musa
