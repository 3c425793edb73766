/*!
 * \file tl_templates/musa/tme.h
 * \brief TME (tensor memory engine, mp_31) tile copies, as the compiler prints them (src/codegen/call_rules_tme.cc):
 *
 *   tl::tma_load<SG, SS, SL, INNER, OUTER[, BLOCKS, BLOCK_BYTES]>(desc, bar, smem, box, coord)   load a box
 *                                                                          (onto async barrier `bar`)
 *   tl::tma_store<SG, SS, SL, INNER, OUTER[, BLOCKS, BLOCK_BYTES]>(desc, smem, box, coord)       store a box
 *   tl::tma_store_arrive()   commit this thread's stores      tl::tma_store_wait<0>()   they have read shared memory
 *
 * (The names and the CacheHint spelling are those of Moore Threads' TileLang port, whose tests look for them.)
 * `desc` is the kernel's `__grid_constant__ const MUtensorDescriptor` parameter (built by the host wrapper), `box`
 * and `coord` give the extent and the first element per dimension, innermost first: `vNi32_t` values for rank
 * N >= 2, ints for rank 1. The box lands in shared memory densely, innermost first, then swizzled with granularity
 * SG (0 none, 1 16 B, 2 32 B, 3 64 B), stride SS (3 = 256 B) and line SL (1 = 256 B). INNER / OUTER are the cache
 * hints (CacheHint::CACHE_NONE / _ONCE / _NORMAL / _PERSIST = 0..3). The built-ins are MUSA_FACTS.md's ("TME");
 * the simulator implements them (src/tl_templates/sim/sim/tme.h), so this file compiles unchanged for both.
 */
#pragma once

#include "common.h"

#if !defined(TL_SIMULATOR) && !defined(__MUSACC_RTC__)
#include <musa.h>  // MUtensorDescriptor (the simulator's musa_runtime.h, included by common.h, declares it)
#endif

// The kernel parameter qualifier of descriptors (CUDA's spelling; the simulator defines it as nothing).
#ifndef __grid_constant__
#define __grid_constant__ __attribute__((grid_constant))
#endif

// Box and coordinate vectors of the built-ins. The simulator defines them as aggregates; mcc takes clang vectors
// [I: the port gets them from MUTLASS's headers; define TL_MUSA_HAVE_VNI32 where a MUSA header already does].
#if !defined(TL_SIMULATOR) && !defined(TL_MUSA_HAVE_VNI32)
typedef int v2i32_t __attribute__((ext_vector_type(2)));
typedef int v3i32_t __attribute__((ext_vector_type(3)));
typedef int v4i32_t __attribute__((ext_vector_type(4)));
typedef int v5i32_t __attribute__((ext_vector_type(5)));
#endif

// The simulator's built-ins take the call site as trailing defaulted parameters: the wrappers pass their caller's
// (the same definitions as async_copy.h's; an identical redefinition is allowed).
#if defined(TL_SIMULATOR)
#define TL_CALL_SITE_PARAMS , const char *tl_file = __builtin_FILE(), int tl_line = __builtin_LINE()
#define TL_CALL_SITE , tl_file, tl_line
#else
#define TL_CALL_SITE_PARAMS
#define TL_CALL_SITE
#endif

// The cache hints of TME instructions, by the names Moore Threads' port prints (`CacheHint::CACHE_ONCE`); their
// values are the built-ins' hint operands.
#if !defined(TL_MUSA_HAVE_CACHE_HINT)
enum class CacheHint : int { CACHE_NONE = 0, CACHE_ONCE = 1, CACHE_NORMAL = 2, CACHE_PERSIST = 3 };
#endif

namespace tl {
namespace tme_detail {

#if defined(TL_SIMULATOR)
TL_DEVICE void* smem_ptr(const void* p) { return const_cast<void*>(p); }
#else
// The built-ins take shared-memory pointers in clang's address space 3.
TL_DEVICE __attribute__((address_space(3))) void* smem_ptr(const void* p) {
  return (__attribute__((address_space(3))) void*)(p);
}
#endif

TL_DEVICE uint64_t desc_addr(const MUtensorDescriptor& desc) { return reinterpret_cast<uint64_t>(&desc); }

template <int SG, int SS, int SL>
TL_DEVICE constexpr bool check_params() {
  static_assert(SG >= 0 && SG <= 3 && SS >= 0 && SS <= 3 && SL >= 0 && SL <= 1, "tl::tma: bad swizzle code");
  static_assert(SG < SS + 2 && SS <= SL + 2, "tl::tma: the swizzle needs sg < ss + 2 and ss <= sl + 2");
  return true;
}

constexpr int kNoPrefetch = 0;

// Column block b of a copy: `b * box[0]` elements further along the innermost dimension.
TL_DEVICE int32_t innermost(int32_t v) { return v; }
template <class V>
TL_DEVICE int32_t innermost(const V& v) { return v[0]; }
TL_DEVICE int32_t shifted(int32_t coord, int32_t delta) { return coord + delta; }
template <class V>
TL_DEVICE V shifted(V coord, int32_t delta) {
  coord[0] += delta;
  return coord;
}

}  // namespace tme_detail

// One overload per rank (the type of box / coord: int32_t, v2i32_t .. v5i32_t): the built-ins differ in name.
#if defined(__MUSA_ARCH__) && __MUSA_ARCH__ >= 310
#define TL_TME_LOAD(N) \
  __musa_tme_ld_tile_##N##d(bar, tme_detail::smem_ptr(smem), tme_detail::desc_addr(desc), box, coord, SG, SS, SL, \
                            tme_detail::kNoPrefetch, static_cast<int>(Inner), static_cast<int>(Outer), 0 TL_CALL_SITE)
// The trailing operand: 0 on loads and 1 on stores, as the port passes them [I: undocumented].
#define TL_TME_STORE(N) \
  __musa_tme_st_##N##d(tme_detail::smem_ptr(smem), tme_detail::desc_addr(desc), box, coord, SG, SS, SL, \
                       static_cast<int>(Inner), static_cast<int>(Outer), 1 TL_CALL_SITE)
#elif defined(__MUSA_ARCH__)
#define TL_TME_LOAD(N) static_assert(SG < 0, "tl::tma_load: the TME exists on mp_31 and later")
#define TL_TME_STORE(N) static_assert(SG < 0, "tl::tma_store: the TME exists on mp_31 and later")
#else  // mcc's host pass: the built-ins are device-only
#define TL_TME_LOAD(N) (void)0
#define TL_TME_STORE(N) (void)0
#endif

// Blocks > 1: that many instructions, each BlockBytes further in shared memory and box[0] elements further along
// the innermost dimension (the column blocks of a swizzled tile wider than 256 bytes).
#define TL_TME_WRAPPERS(N, VEC)                                                                                   \
  template <int SG, int SS, int SL, CacheHint Inner, CacheHint Outer, int Blocks = 1, int BlockBytes = 0>         \
  TL_DEVICE void tma_load(const MUtensorDescriptor& desc, uint32_t bar, void* tile, VEC box, VEC origin        \
                          TL_CALL_SITE_PARAMS) {                                                                 \
    static_assert(tme_detail::check_params<SG, SS, SL>(), "");                                                  \
    for (int b = 0; b < Blocks; ++b) {                                                                           \
      void* smem = static_cast<char*>(tile) + b * BlockBytes;                                                    \
      VEC coord = tme_detail::shifted(origin, b * tme_detail::innermost(box));                                   \
      TL_TME_LOAD(N);                                                                                            \
    }                                                                                                            \
  }                                                                                                              \
  template <int SG, int SS, int SL, CacheHint Inner, CacheHint Outer, int Blocks = 1, int BlockBytes = 0>         \
  TL_DEVICE void tma_store(const MUtensorDescriptor& desc, const void* tile, VEC box, VEC origin                \
                           TL_CALL_SITE_PARAMS) {                                                                \
    static_assert(tme_detail::check_params<SG, SS, SL>(), "");                                                  \
    for (int b = 0; b < Blocks; ++b) {                                                                           \
      const void* smem = static_cast<const char*>(tile) + b * BlockBytes;                                        \
      VEC coord = tme_detail::shifted(origin, b * tme_detail::innermost(box));                                   \
      TL_TME_STORE(N);                                                                                           \
    }                                                                                                            \
  }

TL_TME_WRAPPERS(1, int32_t)
TL_TME_WRAPPERS(2, v2i32_t)
TL_TME_WRAPPERS(3, v3i32_t)
TL_TME_WRAPPERS(4, v4i32_t)
TL_TME_WRAPPERS(5, v5i32_t)

#undef TL_TME_WRAPPERS
#undef TL_TME_LOAD
#undef TL_TME_STORE

/*! \brief Commit the calling thread's TME stores issued since its last commit. */
TL_DEVICE void tma_store_arrive() {
#if defined(__MUSA_ARCH__) && __MUSA_ARCH__ >= 310
  __musa_tme_store_commit();
#endif
}

/*! \brief Wait until the calling thread's committed TME stores have read their shared-memory tiles. Only N = 0 (all
 *         of them): the SDK's wait has no count. */
#if defined(TL_SIMULATOR)
template <int N = 0>
TL_DEVICE void tma_store_wait(int tl_line = __builtin_LINE()) {
  static_assert(N == 0, "tl::tma_store_wait: MUSA waits for all committed TME stores (N = 0)");
#if __MUSA_ARCH__ >= 310
  __musa_tme_store_read_wait(tl_line);
#endif
}
#else
template <int N = 0>
TL_DEVICE void tma_store_wait() {
  static_assert(N == 0, "tl::tma_store_wait: MUSA waits for all committed TME stores (N = 0)");
#if defined(__MUSA_ARCH__) && __MUSA_ARCH__ >= 310
  __musa_tme_store_read_wait();
#endif
}
#endif

}  // namespace tl
