/*!
 * \file tl_templates/sim/sim/async_copy.h
 * \brief LDLMS asynchronous global -> shared copies, robust (bounded) loads, and the hints with no effect here.
 *
 * Prototypes, as device code calls them (the port's tl_templates/musa/copy.h; pointers are plain here, mcc's
 * address-space casts are the wrappers' business):
 *   void __musa_memcpy_g2s(void* dst, const void* src, uint32_t bytes, int prefetch);      // bytes 4, 8 or 16
 *   void __musa_memcpy_g2s_commit_group();      // close the thread's group of copies issued since its last commit
 *   void __musa_memcpy_g2s_wait_group(int n);   // land all but the newest n committed groups
 *   void __musa_memcpy_g2s_wait();              // land every copy of the thread, committed or not
 *   mp_31: void __musa_memcpy_g2s_robust_v4(void* dst, const void* src, uint32_t bytes,
 *                                            __musa::robust_v4_addr_t desc, int prefetch);
 *          T __musa_ld_v4_robust_<S>(const void* addr, __musa::robust_v4_addr_t desc, int prefetch);
 *   mp_22: void __musa_memcpy_g2s_robust(void* dst, const void* src, uint32_t bytes, __musa::robust_addr_t desc,
 *                                         int prefetch);
 *          T __musa_ld_robust_<S>(const void* addr, __musa::robust_addr_t desc);
 *   with S/T = i8/int8_t, i16/int16_t, i32/int32_t, i64/int64_t, v3i32/v3i32_t, v4i32/v4i32_t, v8i32/v8i32_t,
 *   v16i32/v16i32_t, v32i32/v32i32_t (the suffixes the port's robust_load uses).
 *   mp_31: void __musa_lma_wait();              // the warp's loads from shared memory complete [I]
 *   void __musa_loop_transparent_outermost();   // a loop hint [I]
 *
 * Timing model: copies are per issuing thread. The source is read at issue (bytes outside a robust descriptor read
 * as 0), the destination bytes are poisoned at issue, and the data lands at the issuing thread's wait. So a kernel
 * that reads the destination before the wait (or before the block barrier after it, in another thread) reads
 * poison. Copies a thread never waits for are dropped with the block; in checked mode they end the launch when the
 * thread exits, and any access to a destination byte whose copy has not landed is an error naming the copy.
 * The simulator's loads from shared memory complete at issue, so __musa_lma_wait has nothing to wait for.
 */
#pragma once

#include <musa_robust.h>

#include <cstdint>
#include <cstring>

#include "config.h"
#include "profile.h"
#include "race_detector.h"
#include "uninit_reads.h"
#include "scheduler.h"
#include "thread_state.h"
#include "unavailable_builtin.h"
#include "vector_i32.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {
namespace ldlms {

inline constexpr uint32_t kMaxCopyBytes = 16;

// The model's body, compiled once in the runtime (async_copy_outlined.h; visibility.h, TL_SIM_OUTLINED).
/*! \brief Queue the running thread's copy of `bytes` (already read into `data`) to `dst`, poisoning `dst` until it
 *         lands; `arena` is the issuing library's dynamic shared memory (checked mode's addresses). */
TL_SIM_OUTLINED void Enqueue(const char* what, void* dst, const void* src, uint32_t bytes, const unsigned char* data,
                             unsigned char* arena, const char* file, int line) TL_SIM_OUTLINED_AS("ldlms_enqueue");
/*! \brief Close the running thread's group of copies issued since its last commit. */
TL_SIM_OUTLINED void Commit(const char* what) TL_SIM_OUTLINED_AS("ldlms_commit");
/*! \brief Land the running thread's copies: all of them, or only those of committed groups but the newest `keep`. */
TL_SIM_OUTLINED void Land(const char* what, uint32_t keep, bool committed_only, const char* file, int line)
    TL_SIM_OUTLINED_AS("ldlms_land");

/*! \brief Read `bytes` at `src` into `out`, zero where `covers` says a byte is outside the robust range. */
template <typename Covers>
inline void ReadSource(const void* src, uint32_t bytes, unsigned char* out, Covers&& covers) {
  const auto* p = static_cast<const unsigned char*>(src);
  for (uint32_t i = 0; i < bytes; ++i) out[i] = covers(p + i) ? p[i] : 0;
}

/*! \brief Issue one copy for the running thread; `covers(p)` says whether source byte p may be read. The source is
 *         read here (its test is the kernel's), the rest is the runtime's Enqueue. */
template <typename Covers>
inline void Issue(const char* what, void* dst, const void* src, uint32_t bytes, Covers&& covers, const char* file,
                  int line) {
  BlockRunner& block = CurrentBlock(what);
  const char* where = SourceName(file);
  if (bytes != 4 && bytes != 8 && bytes != 16)
    block.Fail(musaErrorIllegalInstruction, "%s (%s:%d): %u bytes; a copy moves 4, 8 or 16 bytes", what, where, line,
               bytes);
  if (dst == nullptr || src == nullptr)
    block.Fail(musaErrorIllegalAddress, "%s (%s:%d): a null %s pointer", what, where, line,
               dst == nullptr ? "destination" : "source");
  if (reinterpret_cast<uintptr_t>(dst) % bytes != 0 || reinterpret_cast<uintptr_t>(src) % bytes != 0)
    block.Fail(musaErrorIllegalAddress, "%s (%s:%d): a %u-byte copy from %p to %p is not %u-byte aligned [I]",
               what, where, line, bytes, src, dst, bytes);
  unsigned char data[kMaxCopyBytes];
  ReadSource(src, bytes, data, covers);
  Enqueue(what, dst, src, bytes, data, buf_dyn_shmem, file, line);
}

inline bool Anywhere(const void*) { return true; }

}  // namespace ldlms

/*! \brief A synchronous robust load of a T at `addr`: bytes outside the descriptor's range read as 0. */
template <typename T, typename Desc>
inline T RobustLoad(const void* addr, const Desc& desc) {
  T value;
  ldlms::ReadSource(addr, sizeof(T), reinterpret_cast<unsigned char*>(&value),
                    [&](const void* p) { return RobustCovers(desc, p); });
  return value;
}

}  // namespace tl_sim
#pragma GCC visibility pop

#if !defined(TL_SIM_LINK_RUNTIME)  // a linked kernel library calls the runtime's
#include "async_copy_outlined.h"
#endif

#pragma GCC visibility push(hidden)
// The trailing parameters capture the call site for error messages; kernels call these without them.
inline void __musa_memcpy_g2s(void* dst, const void* src, uint32_t bytes, int prefetch,
                              const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  (void)prefetch;
  tl_sim::ldlms::Issue("__musa_memcpy_g2s", dst, src, bytes, tl_sim::ldlms::Anywhere, file, line);
}
inline void __musa_memcpy_g2s_commit_group() { tl_sim::ldlms::Commit("__musa_memcpy_g2s_commit_group"); }
inline void __musa_memcpy_g2s_wait_group(int n, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  if (n < 0)
    tl_sim::CurrentBlock("__musa_memcpy_g2s_wait_group")
        .Fail(musaErrorIllegalInstruction, "__musa_memcpy_g2s_wait_group (%s:%d): n = %d is negative",
              tl_sim::SourceName(file), line, n);
  tl_sim::ldlms::Land("__musa_memcpy_g2s_wait_group", static_cast<uint32_t>(n), true, file, line);
}
inline void __musa_memcpy_g2s_wait(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  tl_sim::ldlms::Land("__musa_memcpy_g2s_wait", 0, false, file, line);
}
inline void __musa_loop_transparent_outermost() {}

#define TL_SIM_ROBUST_LOADS(PREFIX, DESC, ...)                                                            \
  inline int8_t PREFIX##i8(const void* a, DESC d __VA_ARGS__) { return tl_sim::RobustLoad<int8_t>(a, d); }       \
  inline int16_t PREFIX##i16(const void* a, DESC d __VA_ARGS__) { return tl_sim::RobustLoad<int16_t>(a, d); }    \
  inline int32_t PREFIX##i32(const void* a, DESC d __VA_ARGS__) { return tl_sim::RobustLoad<int32_t>(a, d); }    \
  inline int64_t PREFIX##i64(const void* a, DESC d __VA_ARGS__) { return tl_sim::RobustLoad<int64_t>(a, d); }    \
  inline v3i32_t PREFIX##v3i32(const void* a, DESC d __VA_ARGS__) { return tl_sim::RobustLoad<v3i32_t>(a, d); }  \
  inline v4i32_t PREFIX##v4i32(const void* a, DESC d __VA_ARGS__) { return tl_sim::RobustLoad<v4i32_t>(a, d); }  \
  inline v8i32_t PREFIX##v8i32(const void* a, DESC d __VA_ARGS__) { return tl_sim::RobustLoad<v8i32_t>(a, d); }  \
  inline v16i32_t PREFIX##v16i32(const void* a, DESC d __VA_ARGS__) {                                    \
    return tl_sim::RobustLoad<v16i32_t>(a, d);                                                           \
  }                                                                                                      \
  inline v32i32_t PREFIX##v32i32(const void* a, DESC d __VA_ARGS__) {                                    \
    return tl_sim::RobustLoad<v32i32_t>(a, d);                                                           \
  }

#define TL_SIM_ROBUST_UNAVAILABLE(PREFIX, ARCHS)          \
  TL_SIM_UNAVAILABLE_BUILTIN(PREFIX##i8, ARCHS)           \
  TL_SIM_UNAVAILABLE_BUILTIN(PREFIX##i16, ARCHS)          \
  TL_SIM_UNAVAILABLE_BUILTIN(PREFIX##i32, ARCHS)          \
  TL_SIM_UNAVAILABLE_BUILTIN(PREFIX##i64, ARCHS)          \
  TL_SIM_UNAVAILABLE_BUILTIN(PREFIX##v3i32, ARCHS)        \
  TL_SIM_UNAVAILABLE_BUILTIN(PREFIX##v4i32, ARCHS)        \
  TL_SIM_UNAVAILABLE_BUILTIN(PREFIX##v8i32, ARCHS)        \
  TL_SIM_UNAVAILABLE_BUILTIN(PREFIX##v16i32, ARCHS)       \
  TL_SIM_UNAVAILABLE_BUILTIN(PREFIX##v32i32, ARCHS)

#if __MUSA_ARCH__ >= 310
inline void __musa_memcpy_g2s_robust_v4(void* dst, const void* src, uint32_t bytes, __musa::robust_v4_addr_t desc,
                                        int prefetch, const char* file = __builtin_FILE(),
                                        int line = __builtin_LINE()) {
  (void)prefetch;
  tl_sim::ldlms::Issue("__musa_memcpy_g2s_robust_v4", dst, src, bytes,
                       [&](const void* p) { return tl_sim::RobustCovers(desc, p); }, file, line);
}
TL_SIM_ROBUST_LOADS(__musa_ld_v4_robust_, __musa::robust_v4_addr_t, , int)
TL_SIM_UNAVAILABLE_BUILTIN(__musa_memcpy_g2s_robust, "mp_22 (mp_31 has __musa_memcpy_g2s_robust_v4)")
TL_SIM_ROBUST_UNAVAILABLE(__musa_ld_robust_, "mp_22 (mp_31 has __musa_ld_v4_robust_*)")
/*! \brief The simulator's loads from shared memory complete at issue: nothing is outstanding [I]. */
inline void __musa_lma_wait() {}
#elif __MUSA_ARCH__ == 220
inline void __musa_memcpy_g2s_robust(void* dst, const void* src, uint32_t bytes, __musa::robust_addr_t desc,
                                     int prefetch, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  (void)prefetch;
  tl_sim::ldlms::Issue("__musa_memcpy_g2s_robust", dst, src, bytes,
                       [&](const void* p) { return tl_sim::RobustCovers(desc, p); }, file, line);
}
TL_SIM_ROBUST_LOADS(__musa_ld_robust_, __musa::robust_addr_t, )
TL_SIM_UNAVAILABLE_BUILTIN(__musa_memcpy_g2s_robust_v4, "mp_31/mp_32 (mp_22 has __musa_memcpy_g2s_robust)")
TL_SIM_ROBUST_UNAVAILABLE(__musa_ld_v4_robust_, "mp_31/mp_32 (mp_22 has __musa_ld_robust_*)")
TL_SIM_UNAVAILABLE_BUILTIN(__musa_lma_wait, "mp_31/mp_32 (mcc > 4; older code uses __syncwarp)")
#else
TL_SIM_UNAVAILABLE_BUILTIN(__musa_memcpy_g2s_robust_v4, "mp_31/mp_32")
TL_SIM_UNAVAILABLE_BUILTIN(__musa_memcpy_g2s_robust, "mp_22")
TL_SIM_ROBUST_UNAVAILABLE(__musa_ld_v4_robust_, "mp_31/mp_32")
TL_SIM_ROBUST_UNAVAILABLE(__musa_ld_robust_, "mp_22")
TL_SIM_UNAVAILABLE_BUILTIN(__musa_lma_wait, "mp_31/mp_32 (mcc > 4; older code uses __syncwarp)")
#endif

#undef TL_SIM_ROBUST_LOADS
#undef TL_SIM_ROBUST_UNAVAILABLE
#pragma GCC visibility pop
