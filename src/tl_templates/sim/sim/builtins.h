/*!
 * \file tl_templates/sim/sim/builtins.h
 * \brief Thread-level device built-ins: thread and block indices, block barriers, fences, __trap and assert.
 */
#pragma once

#include <cassert>
#include <cstdio>
#include <cstdlib>

#include "config.h"
#include "profile.h"
#include "runtime_types.h"
#include "scheduler.h"
#include "thread_state.h"

// Read-only views of the running simulated thread's coordinates.
#define threadIdx (static_cast<const ::uint3&>(::tl_sim::g_thread.thread_idx))
#define blockIdx (static_cast<const ::uint3&>(::tl_sim::g_thread.block_idx))
#define blockDim (static_cast<const ::dim3&>(::tl_sim::g_thread.block_dim))
#define gridDim (static_cast<const ::dim3&>(::tl_sim::g_thread.grid_dim))

#pragma GCC visibility push(hidden)
inline constexpr int warpSize = static_cast<int>(tl_sim::kWarpSize);

namespace tl_sim {

// __syncthreads and __syncthreads_lm are one barrier (MUSA_LAYOUTS.md section 8): threads may meet across them.
inline constexpr Collective kSyncThreads{"__syncthreads", nullptr};

inline void CountPredicates(BlockRunner& block, Rendezvous& rv) {
  uint64_t count = 0;
  rv.members.ForEach([&](uint32_t i) { count += block.fiber(rv.base + i).slot.in != 0; });
  const uint64_t total = rv.expected;
  rv.members.ForEach([&](uint32_t i) {
    CollectiveSlot& s = block.fiber(rv.base + i).slot;
    s.out = s.arg == 0 ? count : s.arg == 1 ? (count == total) : (count != 0);
  });
}
// One collective for the three reductions (slot.arg 0 = count, 1 = and, 2 = or): they are one barrier instruction.
inline constexpr Collective kSyncThreadsReduce{"__syncthreads_count/and/or", &CountPredicates};

inline void BlockBarrier(const char* file, int line) {
  BlockRunner& block = CurrentBlock("__syncthreads");
  if (g_thread.profile != nullptr && block.current().linear == 0) g_thread.profile->Add(profile::k_block_barriers, 1);
  block.Arrive(kSyncThreads, Group::kBlock, block.all_threads(), CollectiveSlot{}, file, line);
}

inline int BlockReduce(int predicate, int kind, const char* file, int line) {
  BlockRunner& block = CurrentBlock("__syncthreads_count/and/or");
  CollectiveSlot in;
  in.in = predicate != 0;
  in.arg = kind;
  return static_cast<int>(block.Arrive(kSyncThreadsReduce, Group::kBlock, block.all_threads(), in, file, line));
}

}  // namespace tl_sim

// The trailing parameters capture the call site for error messages; kernels call these with no arguments.
inline void __syncthreads(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  tl_sim::BlockBarrier(file, line);
}
inline void __syncthreads_lm(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  tl_sim::BlockBarrier(file, line);
}
inline int __syncthreads_count(int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return tl_sim::BlockReduce(predicate, 0, file, line);
}
inline int __syncthreads_and(int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return tl_sim::BlockReduce(predicate, 1, file, line);
}
inline int __syncthreads_or(int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return tl_sim::BlockReduce(predicate, 2, file, line);
}

// Blocks may run on several OS threads: fences are real fences.
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/*! \brief Abort the launch; the launch returns musaErrorLaunchFailure naming the block and thread. */
[[noreturn]] inline void __trap() {
  tl_sim::CurrentBlock("__trap").Fail(musaErrorLaunchFailure, "__trap() was called");
}

#pragma GCC visibility pop

// A failed assert() inside a kernel aborts the launch with musaErrorAssert (as on the device) instead of the
// process. This library's own (hidden) definition takes precedence over glibc's for the calls made from the
// library. Outside a kernel it behaves like glibc's.
extern "C" __attribute__((visibility("hidden"))) inline void __assert_fail(const char* assertion, const char* file,
                                                                             unsigned int line,
                                                                             const char* function) noexcept {
  if (tl_sim::g_thread.block != nullptr && tl_sim::g_thread.fiber != nullptr) {
    tl_sim::g_thread.block->Fail(musaErrorAssert, "assertion `%s' failed at %s:%u in %s", assertion,
                                 tl_sim::SourceName(file), line, function);
  }
  std::fprintf(stderr, "%s:%u: %s: Assertion `%s' failed.\n", file, line, function, assertion);
  std::abort();
}
