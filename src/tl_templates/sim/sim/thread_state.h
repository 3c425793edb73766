/*!
 * \file tl_templates/sim/sim/thread_state.h
 * \brief Everything the simulator keeps per OS thread, in ONE thread_local struct.
 *
 * Invariant relied on by shared_memory.h: this struct is the only simulator state in thread-local storage, so every
 * other thread_local object of the kernel's library is `__shared__` memory and may be poisoned per block.
 * The struct must stay constant-initialised (no TLS guard variables, no constructors run per thread).
 */
#pragma once

#include <pthread.h>

#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>

#include "runtime_types.h"
#include "vector_types.h"
#include "visibility.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

class BlockRunner;
class RaceDetector;
class WrittenShadow;
class PoisonedGlobals;
class GridFlags;
class GridBarrier;
struct Fiber;
namespace profile {
class Recorder;
}

inline constexpr size_t kErrorDetailBytes = 1024;

struct OsThreadState {
  // What kernel code reads as threadIdx / blockIdx / blockDim / gridDim. thread_idx is rewritten at every fiber
  // switch, the others when this OS thread starts a launch or a block.
  uint3 thread_idx{0, 0, 0};
  uint3 block_idx{0, 0, 0};
  dim3 block_dim{1, 1, 1};
  dim3 grid_dim{1, 1, 1};
  size_t dynamic_smem = 0;  // bytes of dynamic shared memory the running launch asked for
  BlockRunner* block = nullptr;  // the block this OS thread is running, null outside kernels
  Fiber* fiber = nullptr;        // the running simulated thread

  // Set by the sanitizer's hooks (access_checks.h) at every checked memory access: what was accessed and the line
  // of the generated source, for the messages of the watchdog and of faults. Cleared at the start of each block and
  // whenever a simulated thread is resumed, so they always describe the running thread.
  int last_access_line = 0;
  const char* last_access_what = nullptr;
  // The nibble (0 low, 1 high) of a packed 4-bit access in flight (CheckSharedNibble), -1 otherwise: read by the
  // cold checked-mode path only, so the hot CheckAccess of every other access carries no extra argument.
  int access_nibble = -1;

  // The sync epoch the next block run on this OS thread starts from: epochs only grow on a thread, across blocks
  // and launches, so the detector never mistakes an earlier block's record for the current block's (scheduler.h).
  uint64_t next_sync_epoch = 1;
  // Checked mode: the worker's race detector, which the sanitizer's hooks report accesses to (race_detector.h).
  RaceDetector* race_detector = nullptr;
  // Checked mode: the worker's shadow of written shared memory, and the switch of every uninitialised-read check
  // (uninit_reads.h).
  WrittenShadow* uninit_shadow = nullptr;
  // The global ranges the launcher poisoned for the call this host thread is making (poisoned_globals.h), and, on
  // every worker of a checked launch, the same record: the switch of the uninitialised global-read check.
  PoisonedGlobals* poisoned_globals = nullptr;
  PoisonedGlobals* global_shadow = nullptr;
  // TILELANG_SIM_PROFILE=1: the worker's counters, which the hooks and the device models report to (profile.h).
  profile::Recorder* profile = nullptr;
  // The launch's inter-block flags (grid_flags.h) and the running block's place in the launch's run order (blocks
  // are claimed in that order): what a flag wait needs to know which blocks have finished before it.
  GridFlags* grid_flags = nullptr;
  uint64_t block_run = 0;
  // A cooperative launch's grid barrier (grid_barrier.h); null in any other launch.
  GridBarrier* grid_barrier = nullptr;

  // Host-side error state of the runtime API (per host thread, as in MUSA).
  musaError_t last_error = musaSuccess;
  musaError_t detail_code = musaSuccess;  // the code `detail` explains
#if defined(TL_SIM_SHARED_RUNTIME)
  // On the heap (ErrorDetail): this struct is initial-exec TLS, and the static TLS room for it is small.
  char* detail = nullptr;
#else
  char detail[kErrorDetailBytes] = {};
#endif

  // The TLS block of the kernel library whose dynamic shared memory is at tls_key (shared_memory.h).
  const unsigned char* tls_key = nullptr;
  unsigned char* tls_begin = nullptr;
  size_t tls_size = 0;
};

#if defined(TL_SIM_SHARED_RUNTIME)
// Owned by the runtime, initial-exec: reading threadIdx is one load from the thread pointer, with no
// __tls_get_addr call (the runtime's TLS is static; this struct is its only thread_local).
TL_SIM_CONSTINIT extern thread_local OsThreadState g_thread __asm__(TL_SIM_RT_SYMBOL("thread")) TL_SIM_RT_EXPORT
    __attribute__((tls_model("initial-exec")));
#else
inline thread_local OsThreadState g_thread;
#endif

#if defined(TL_SIM_SHARED_RUNTIME)
/*! \brief The calling thread's error text buffer (kErrorDetailBytes), allocated at its first error and freed when
 *         the thread exits. */
inline char* ErrorDetail(OsThreadState& t) {
  if (t.detail == nullptr) {
    static pthread_key_t key;
    static const bool created = pthread_key_create(&key, &std::free) == 0;
    t.detail = static_cast<char*>(std::calloc(1, kErrorDetailBytes));
    if (t.detail == nullptr) std::abort();
    if (created) pthread_setspecific(key, t.detail);
  }
  return t.detail;
}
/*! \brief The calling thread's last error text ("" before any). */
inline const char* ErrorDetailText(const OsThreadState& t) { return t.detail != nullptr ? t.detail : ""; }
#else
inline char* ErrorDetail(OsThreadState& t) { return t.detail; }
inline const char* ErrorDetailText(const OsThreadState& t) { return t.detail; }
#endif

/*! \brief Record `code` with a detailed message as this host thread's last error and return the code. */
__attribute__((format(printf, 2, 3))) inline musaError_t SetError(musaError_t code, const char* fmt, ...) {
  OsThreadState& t = g_thread;
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(ErrorDetail(t), kErrorDetailBytes, fmt, ap);
  va_end(ap);
  t.detail_code = code;
  t.last_error = code;
  return code;
}

}  // namespace tl_sim
#pragma GCC visibility pop
