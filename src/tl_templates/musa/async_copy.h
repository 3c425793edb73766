/*!
 * \file tl_templates/musa/async_copy.h
 * \brief Asynchronous barriers, LDLMS asynchronous global -> shared copies and robust-descriptor loads: the `tl::`
 *        wrappers the printer emits (src/codegen/call_rules_async.cc, tileop/async_copy.py).
 *  - `tl::barrier_record(n)`, `tl::barrier_init(id, warps)`, `tl::barrier_arrive(id)` (returns the phase),
 *    `tl::barrier_wait(id, parity)`, `tl::barrier_expect_tx(id, bytes)`, `tl::barrier_arrive_expect_tx(id, bytes)`,
 *    `tl::barrier_sync(id)` (arrive, then wait for that phase: a barrier over part of the block); mp_31 and later;
 *  - `tl::cp_async_gs<Bytes>(dst, src)`: one asynchronous copy of 4, 8 or 16 bytes;
 *    `tl::cp_async_gs_conditional<Bytes>(dst, src, in_bounds)`: the same, but a piece out of bounds is zero-filled
 *    instead (synchronously);
 *  - `tl::cp_async_commit()` / `tl::cp_async_wait<N>()`: close the thread's group of copies / wait until at
 *    most N groups are in flight (mcc 4.x has no groups: commit does nothing and every wait waits for all);
 *    upstream TileLang's and Moore Threads' names for these copies;
 *  - `tl::cp_async_wait_all()`: wait for every copy of the thread, committed or not (T.cp_async_barrier_noinc);
 *  - `tl::RobustDesc`, `tl::make_robust_desc(ptr, bytes)`: a descriptor of [ptr, ptr + bytes); loads through it
 *    outside that range read 0 (`__musa::robust_ptr`: the v4 form on mp_31, the 3-word form on mp_22);
 *  - `tl::cp_async_gs_robust<Bytes>(dst, src, desc)`, `tl::cp_async_gs_robust_conditional<Bytes>(dst, src, desc,
 *    in_bounds)`, `tl::robust_copy<Bytes>(dst, src, desc[, in_bounds])` (synchronous: a robust load of 1..16 bytes,
 *    then a store);
 *  - `tl::lma_wait()`.
 * The built-ins are MUSA's (docs/ASYNC_MODEL.md), called only in the device pass (__MUSA_ARCH__): mcc parses
 * kernel bodies in a host pass too. The simulator (-DTL_SIMULATOR) models them on plain pointers, with the group
 * forms, and its errors name the kernel line that called the wrapper (TL_CALL_SITE); under mcc, pointers carry
 * their address spaces (shared 3, global 1).
 */
#pragma once

#include "common.h"

#if defined(__MUSA_ARCH_LIST__) && __MUSA_ARCH_LIST__ >= 220
#include <musa_robust.h>
#define TL_HAS_LDLMS 1
#endif

#if defined(TL_SIMULATOR)
#define TL_AS_SHARED(T, p) ((T*)(p))
#define TL_AS_GLOBAL(T, p) ((T*)(p))
#else
#define TL_AS_SHARED(T, p) ((T __attribute__((address_space(3)))*)(p))
#define TL_AS_GLOBAL(T, p) ((T __attribute__((address_space(1)))*)(p))
#endif

// The simulator's built-ins take the call site as trailing defaulted parameters: the wrappers pass their own caller's.
#if defined(TL_SIMULATOR)
#define TL_CALL_SITE_PARAMS , const char *tl_file = __builtin_FILE(), int tl_line = __builtin_LINE()
#define TL_CALL_SITE_PARAMS_FIRST const char *tl_file = __builtin_FILE(), int tl_line = __builtin_LINE()
#define TL_CALL_SITE , tl_file, tl_line
#define TL_CALL_SITE_FIRST tl_file, tl_line
#else
#define TL_CALL_SITE_PARAMS
#define TL_CALL_SITE_PARAMS_FIRST
#define TL_CALL_SITE
#define TL_CALL_SITE_FIRST
#endif

// Group forms (commit_group / wait_group(n)) exist from mcc 5 on; the simulator models them.
#if defined(TL_SIMULATOR) || (defined(__MUSACC_VER_MAJOR__) && __MUSACC_VER_MAJOR__ > 4)
#define TL_LDLMS_GROUPS 1
#endif

namespace tl {

// ---- asynchronous barriers (ids 1..63; counts in warps) -----------------------------------------------------
#if defined(__MUSA_ARCH_LIST__) && __MUSA_ARCH_LIST__ >= 310

TL_DEVICE void barrier_record(uint32_t count TL_CALL_SITE_PARAMS) {
#if defined(__MUSA_ARCH__)
  __musa_async_bar_record(count TL_CALL_SITE);
#endif
}

TL_DEVICE void barrier_init(uint32_t id, uint32_t warps TL_CALL_SITE_PARAMS) {
#if defined(__MUSA_ARCH__)
  __musa_async_init_arrival(id, warps, 0 TL_CALL_SITE);
#endif
}

TL_DEVICE uint32_t barrier_arrive(uint32_t id TL_CALL_SITE_PARAMS) {
#if defined(__MUSA_ARCH__)
  return __musa_async_arrive(id TL_CALL_SITE);
#else
  return 0;
#endif
}

TL_DEVICE void barrier_wait(uint32_t id, uint32_t parity TL_CALL_SITE_PARAMS) {
#if defined(__MUSA_ARCH__)
  __musa_async_wait(id, parity TL_CALL_SITE);
#endif
}

TL_DEVICE void barrier_expect_tx(uint32_t id, uint32_t bytes TL_CALL_SITE_PARAMS) {
#if defined(__MUSA_ARCH__)
  __musa_async_add_trans(id, bytes TL_CALL_SITE);
#endif
}

TL_DEVICE void barrier_arrive_expect_tx(uint32_t id, uint32_t bytes TL_CALL_SITE_PARAMS) {
  barrier_expect_tx(id, bytes TL_CALL_SITE);
  barrier_arrive(id TL_CALL_SITE);
}

TL_DEVICE void barrier_sync(uint32_t id TL_CALL_SITE_PARAMS) {
  barrier_wait(id, barrier_arrive(id TL_CALL_SITE) TL_CALL_SITE);
}

#endif

// ---- LDLMS copies and robust loads (mp_22 and later) ---------------------------------------------------------
#if defined(TL_HAS_LDLMS)

template <int Bytes>
TL_DEVICE void cp_async_gs(void* dst, const void* src TL_CALL_SITE_PARAMS) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "LDLMS copies move 4, 8 or 16 bytes");
#if defined(__MUSA_ARCH__)
  __musa_memcpy_g2s(TL_AS_SHARED(void, dst), TL_AS_GLOBAL(void, src), Bytes, 0 /* prefetch */ TL_CALL_SITE);
#endif
}

/*! \brief The piece when it lies in its tensor, else zeros (stored now: nothing to wait for). */
template <int Bytes>
TL_DEVICE void cp_async_gs_conditional(void* dst, const void* src, bool in_bounds TL_CALL_SITE_PARAMS) {
  if (in_bounds) {
    cp_async_gs<Bytes>(dst, src TL_CALL_SITE);
  } else {
    uint8_t* bytes = static_cast<uint8_t*>(dst);
#pragma unroll
    for (int i = 0; i < Bytes; ++i) bytes[i] = 0;
  }
}

TL_DEVICE void cp_async_commit() {
#if defined(__MUSA_ARCH__) && defined(TL_LDLMS_GROUPS)
  __musa_memcpy_g2s_commit_group();
#endif
}

template <int N>
TL_DEVICE void cp_async_wait(TL_CALL_SITE_PARAMS_FIRST) {
#if defined(__MUSA_ARCH__) && defined(TL_LDLMS_GROUPS)
  __musa_memcpy_g2s_wait_group(N TL_CALL_SITE);
#elif defined(__MUSA_ARCH__)
  __musa_memcpy_g2s_wait(TL_CALL_SITE_FIRST);  // no groups: everything in flight
#endif
}

/*! \brief Every copy of the thread landed, committed or not: closing the open group first makes it one to wait for. */
TL_DEVICE void cp_async_wait_all(TL_CALL_SITE_PARAMS_FIRST) {
#if defined(__MUSA_ARCH__) && defined(TL_LDLMS_GROUPS)
  __musa_memcpy_g2s_commit_group();
  __musa_memcpy_g2s_wait_group(0 TL_CALL_SITE);
#elif defined(__MUSA_ARCH__)
  __musa_memcpy_g2s_wait(TL_CALL_SITE_FIRST);
#endif
}

#if __MUSA_ARCH_LIST__ >= 310
using RobustDesc = __musa::robust_v4_addr_t;
TL_DEVICE RobustDesc make_robust_desc(const void* base, uint64_t bytes) {
  __musa::robust_ptr<int8_t> ptr(reinterpret_cast<int8_t*>(const_cast<void*>(base)), bytes);
  return ptr.get_v4_robust_addr();
}
#define TL_ROBUST_LOAD(KIND, ADDR, DESC) __musa_ld_v4_robust_##KIND((ADDR), (DESC), 0)
#define TL_ROBUST_G2S __musa_memcpy_g2s_robust_v4
#else
using RobustDesc = __musa::robust_addr_t;
TL_DEVICE RobustDesc make_robust_desc(const void* base, uint64_t bytes) {
  __musa::robust_ptr<int8_t> ptr(reinterpret_cast<int8_t*>(const_cast<void*>(base)), bytes);
  return ptr.get_robust_addr();
}
#define TL_ROBUST_LOAD(KIND, ADDR, DESC) __musa_ld_robust_##KIND((ADDR), (DESC))
#define TL_ROBUST_G2S __musa_memcpy_g2s_robust
#endif

template <int Bytes>
TL_DEVICE void cp_async_gs_robust(void* dst, const void* src, const RobustDesc& desc TL_CALL_SITE_PARAMS) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "LDLMS copies move 4, 8 or 16 bytes");
#if defined(__MUSA_ARCH__)
  TL_ROBUST_G2S(TL_AS_SHARED(void, dst), TL_AS_GLOBAL(void, src), Bytes, desc, 0 /* prefetch */ TL_CALL_SITE);
#endif
}

/*! \brief Out of bounds: the piece reads through an empty descriptor (all zeros), as Moore Threads' port does. */
template <int Bytes>
TL_DEVICE void cp_async_gs_robust_conditional(void* dst, const void* src, const RobustDesc& desc,
                                              bool in_bounds TL_CALL_SITE_PARAMS) {
  cp_async_gs_robust<Bytes>(dst, src, in_bounds ? desc : make_robust_desc(src, 0) TL_CALL_SITE);
}

/*! \brief A synchronous robust copy of one 1..16-byte piece: a robust load (0 outside desc), then a store. */
template <int Bytes>
TL_DEVICE void robust_copy(void* dst, const void* src, const RobustDesc& desc) {
#if defined(__MUSA_ARCH__)
  const void* addr = src;
  if constexpr (Bytes == 1) {
    auto v = TL_ROBUST_LOAD(i8, addr, desc);
    __builtin_memcpy(dst, &v, 1);
  } else if constexpr (Bytes == 2) {
    auto v = TL_ROBUST_LOAD(i16, addr, desc);
    __builtin_memcpy(dst, &v, 2);
  } else if constexpr (Bytes == 4) {
    auto v = TL_ROBUST_LOAD(i32, addr, desc);
    __builtin_memcpy(dst, &v, 4);
  } else if constexpr (Bytes == 8) {
    auto v = TL_ROBUST_LOAD(i64, addr, desc);
    __builtin_memcpy(dst, &v, 8);
  } else {
    static_assert(Bytes == 16, "robust loads move 1, 2, 4, 8 or 16 bytes");
    auto v = TL_ROBUST_LOAD(v4i32, addr, desc);
    __builtin_memcpy(dst, &v, 16);
  }
#endif
}

/*! \brief Out of bounds: the piece is zeros. */
template <int Bytes>
TL_DEVICE void robust_copy(void* dst, const void* src, const RobustDesc& desc, bool in_bounds) {
  robust_copy<Bytes>(dst, src, in_bounds ? desc : make_robust_desc(src, 0));
}

#undef TL_ROBUST_G2S
#undef TL_ROBUST_LOAD

#endif  // TL_HAS_LDLMS

TL_DEVICE void lma_wait() {
#if defined(__MUSA_ARCH__) && __MUSA_ARCH__ >= 310 && \
    (defined(TL_SIMULATOR) || (defined(__MUSACC_VER_MAJOR__) && __MUSACC_VER_MAJOR__ > 4))
  __musa_lma_wait();
#elif defined(__MUSA_ARCH__)
  __syncwarp();
#endif
}

}  // namespace tl
