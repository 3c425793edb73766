/*!
 * \file tl_templates/sim/sim/access_checks.h
 * \brief The sanitizer build's hooks: every global and shared access of a generated kernel is checked against its
 *        buffer's extent, and every local array starts poisoned.
 *
 * The simulator compiles the kernel as printed with the codegen option `sim_checks` (the user-visible source is
 * the same text without the hooks, line for line): a buffer access `A[i]` becomes
 * `A[tl_sim::CheckGlobal<tl_sim::kLoad>(A, i, lanes, lo, hi, "A", __LINE__)]`, which returns `i` once
 * [i, i + lanes) lies in the buffer's element range [lo, hi) (its shape, strides and element offset), and
 * otherwise ends the launch with musaErrorIllegalAddress naming the buffer, the offset, the range, the thread and
 * the line of the generated source. So a bad index never corrupts the host process, even with the compiler's
 * safety passes switched off. A vector index (gather/scatter) is checked lane by lane.
 *
 * A store prints as `tl_sim::CheckedStore<shared, Unit>(A, i, value, ...)`, which also tells the race detector
 * (checked mode, race_detector.h) whether the store changes memory. Loads and stores are handed to the detector.
 */
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "config.h"
#include "profile.h"
#include "poisoned_globals.h"
#include "race_detector.h"
#include "scheduler.h"
#include "thread_state.h"
#include "uninit_reads.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

/*! \brief What the kernel does at a checked access: `kAddress` takes an element's address (atomics, templates). */
enum AccessKind : uint8_t { kLoad = 0, kStore = 1, kAddress = 2 };

inline const char* AccessVerb(AccessKind kind) { return kind == kLoad ? "load" : kind == kStore ? "store" : "address"; }

/*! \brief Fill a local object (array or scalar) with the poison byte: a read before any write shows as NaN / -1. */
template <typename T>
inline void Poison(T& object) {
  static_assert(std::is_trivially_copyable<typename std::remove_all_extents<T>::type>::value,
                "only plain data is poisoned");
  std::memset(const_cast<void*>(static_cast<const volatile void*>(&object)), kPoisonByte, sizeof(T));
}

[[noreturn]] inline void OutOfBounds(const char* space, AccessKind kind, const char* name, int64_t offset, int lanes,
                                     int64_t lo, int64_t hi, int line) {
  BlockRunner& block = CurrentBlock("a checked memory access");
  if (lanes == 1) {
    block.Fail(musaErrorIllegalAddress,
               "%s %s of `%s` at element %lld is outside its elements [%lld, %lld) (line %d of the kernel source)",
               space, AccessVerb(kind), name, static_cast<long long>(offset), static_cast<long long>(lo),
               static_cast<long long>(hi), line);
  }
  block.Fail(musaErrorIllegalAddress,
             "%s %s of `%s` at elements [%lld, %lld) is outside its elements [%lld, %lld) (line %d of the kernel "
             "source)",
             space, AccessVerb(kind), name, static_cast<long long>(offset), static_cast<long long>(offset + lanes),
             static_cast<long long>(lo), static_cast<long long>(hi), line);
}

/*! \brief Each offset of `index` (an integer, or a tl::vec of them for a gather/scatter). */
template <typename I, typename F>
[[gnu::always_inline]] inline void ForEachOffset(const I& index, F&& f) {
  if constexpr (std::is_integral<I>::value) {
    f(static_cast<int64_t>(index));
  } else {
    for (int i = 0; i < I::size; ++i) f(static_cast<int64_t>(index[i]));
  }
}

/*!
 * \brief Checked mode, a global access of `lanes` elements of `elem_bytes` bytes of `name`, element `offset` at
 *        `first`: a load of an element the launcher poisoned and nothing wrote is the error (poisoned_globals.h); a
 *        store or an address handed out marks the elements written. The runtime's (access_checks_outlined.h).
 */
TL_SIM_OUTLINED void CheckGlobalInit(PoisonedGlobals& globals, AccessKind kind, const volatile void* first,
                                     size_t elem_bytes, int64_t offset, int lanes, const char* name, int line)
    TL_SIM_OUTLINED_AS("check_global_init");

/*!
 * \brief Checked mode's part of CheckAccess for one offset: the race detector's record, the uninitialised-read
 *        shadows of global outputs and shared memory. Out of line, so that the check inlined at every access of
 *        the default mode stays a bounds test and three loads of the thread state.
 */
template <AccessKind kind, bool shared, typename T>
[[gnu::noinline, gnu::cold]] void CheckedModeAccess(OsThreadState& t, T* data, int64_t offset, int lanes, int64_t lo,
                                                    int64_t hi, const char* name, int line, bool unchanged) {
  const int nibble = t.access_nibble;
  if constexpr (kind != kAddress) {
    if (t.race_detector != nullptr) {
      const auto* address = reinterpret_cast<const unsigned char*>(data + offset);
      if (!unchanged) {
        if constexpr (shared) {
          t.race_detector->AccessShared(address, static_cast<uint32_t>(sizeof(T)) * static_cast<uint32_t>(lanes),
                                        kind == kStore, name, data, line);
        } else {
          t.race_detector->AccessGlobal(address, kind == kStore, name, data, line);
        }
      }
      if constexpr (!shared) {
        if (t.global_shadow != nullptr) CheckGlobalInit(*t.global_shadow, kind, data + offset, sizeof(T), offset, lanes, name, line);
      }
    }
  } else if constexpr (!shared) {
    if (t.global_shadow != nullptr) CheckGlobalInit(*t.global_shadow, kind, data + offset, sizeof(T), offset, lanes, name, line);
  }
  // After the race detector: a load of bytes an asynchronous copy has not landed yet is its error, not ours.
  if constexpr (shared) {
    if (t.uninit_shadow != nullptr && nibble >= 0) {  // one nibble of a byte (CheckSharedNibble)
      if (kind == kLoad) t.uninit_shadow->CheckNibbleLoad(data + offset, nibble, name, offset, line);
      else t.uninit_shadow->MarkNibbleWritten(data + offset, nibble);
    } else if (t.uninit_shadow != nullptr) {
      if (kind == kLoad) t.uninit_shadow->CheckLoad(data + offset, lanes, name, offset, line);
      else t.uninit_shadow->MarkWritten(data + offset, sizeof(T) * static_cast<size_t>(lanes), kind == kAddress);
      if (kind == kAddress) t.uninit_shadow->NoteBuffer(data, sizeof(T), lo, hi, name, line);
    }
  }
}

/*!
 * \brief The bounds check, and in checked mode the race detector's record. `unchanged`: a store of the bytes the
 *        memory already holds, which no other access can tell from no store (every replica of a replicated
 *        fragment storing its copy of a value): the detector skips it.
 */
template <AccessKind kind, bool shared, typename T, typename I>
inline I CheckAccess(T* data, I index, int lanes, int64_t lo, int64_t hi, const char* name, int line,
                     bool unchanged = false) {
  OsThreadState& t = g_thread;
  t.last_access_line = line;
  t.last_access_what = name;
  // Always inlined: as a call (gcc -O1 outlines a lambda past some size), every access of a kernel paid one.
  ForEachOffset(index, [&](int64_t offset) __attribute__((always_inline)) {
    if (offset < lo || offset + lanes > hi) {
      OutOfBounds(shared ? "shared" : "global", kind, name, offset, lanes, lo, hi, line);
    }
    if constexpr (kind != kAddress) {
      if (t.profile != nullptr) {
        t.profile->Access(t.block->current().linear, shared, kind == kStore, data + offset,
                          static_cast<uint32_t>(sizeof(T)) * static_cast<uint32_t>(lanes), name, line);
      }
    }
    if (__builtin_expect(t.race_detector != nullptr || t.global_shadow != nullptr || t.uninit_shadow != nullptr, 0)) {
      CheckedModeAccess<kind, shared>(t, data, offset, lanes, lo, hi, name, line, unchanged);
    }
  });
  return index;
}

template <AccessKind kind, typename T, typename I>
inline I CheckGlobal(T* data, I index, int lanes, int64_t lo, int64_t hi, const char* name, int line) {
  return CheckAccess<kind, false>(data, index, lanes, lo, hi, name, line);
}

template <AccessKind kind, typename T, typename I>
inline I CheckShared(T* data, I index, int lanes, int64_t lo, int64_t hi, const char* name, int line) {
  return CheckAccess<kind, true>(data, index, lanes, lo, hi, name, line);
}

/*!
 * \brief The checked print of a byte of packed 4-bit values (FP4) of which only nibble `odd` is used: loaded
 *        (`kLoad`: an fp4 decode) or written (`kAddress`: tl::fp4_e2m1_store's address, an atomic nibble store;
 *        `kStore`: tl::int4_nibble_store's, a read-modify-write of the byte the race detector sees). Checked
 *        mode's shadow of shared memory tracks the nibble (uninit_reads.h): a byte counts written once both halves
 *        are, and a nibble store is no hand-out of the buffer. A global byte is checked as a whole, as before.
 */
template <AccessKind kind, typename T, typename I, typename O>
inline I CheckSharedNibble(T* data, I index, O odd, int64_t lo, int64_t hi, const char* name, int line) {
  static_assert(sizeof(T) == 1, "a nibble is an element of a byte buffer");
  OsThreadState& t = g_thread;
  t.access_nibble = static_cast<int>(odd & 1);
  CheckAccess<kind, true>(data, index, 1, lo, hi, name, line);
  t.access_nibble = -1;
  return index;
}

template <AccessKind kind, typename T, typename I, typename O>
inline I CheckGlobalNibble(T* data, I index, O /*odd*/, int64_t lo, int64_t hi, const char* name, int line) {
  return CheckAccess<kind, false>(data, index, 1, lo, hi, name, line);
}

/*!
 * \brief `*(Unit*)(data + index) = value`, checked: `Unit` is the buffer's element type for a scalar store, the
 *        tl::vec of `lanes` elements for a vector one; the value converts as the plain assignment would.
 */
template <bool shared, typename Unit, typename T, typename I, typename V>
inline void CheckedStore(T* data, I index, const V& value, int lanes, int64_t lo, int64_t hi, const char* name,
                         int line) {
  using Target = typename std::conditional<std::is_volatile<T>::value, volatile Unit, Unit>::type;
  Unit converted;
  converted = value;
  bool unchanged = false;
  if (g_thread.race_detector != nullptr) {
    const int64_t offset = static_cast<int64_t>(index);
    if (offset >= lo && offset + lanes <= hi) {
      unchanged = std::memcmp(&converted, const_cast<const void*>(static_cast<const volatile void*>(data + offset)),
                              sizeof(Unit)) == 0;
    }
  }
  CheckAccess<kStore, shared>(data, index, lanes, lo, hi, name, line, unchanged);
  if (WrittenShadow* shadow = g_thread.uninit_shadow)  // checked mode: a NaN from an unwritten fragment/local
    shadow->CheckStoredValue(g_thread.block->current().linear, reinterpret_cast<const T*>(&converted), lanes, name,
                             static_cast<int64_t>(index), line);
  *reinterpret_cast<Target*>(data + index) = converted;
  if (!unchanged && g_thread.block != nullptr) g_thread.block->NoteProgress();  // for the watchdog
}

/*! \brief A statement's arithmetic (`instructions`, counted by the code generator: arithmetic_count.h), charged to
 *         the running thread's clock when profiling (profile.h), with its dependence `depth` and the independent
 *         `iterations` it runs beside (dependence_depth.h), which the performance model's latency term reads. */
inline void Compute(uint32_t instructions, uint32_t depth, uint64_t iterations) {
  if (profile::g_profiled_launches.load(std::memory_order_relaxed) == 0) return;  // the common case, cheaply
  OsThreadState& t = g_thread;
  if (t.profile != nullptr) t.profile->Compute(t.block->current().linear, instructions, depth, iterations);
}

}  // namespace tl_sim
#pragma GCC visibility pop

#if !defined(TL_SIM_LINK_RUNTIME)  // a linked kernel library calls the runtime's
#include "access_checks_outlined.h"
#endif
