/*!
 * \file tl_templates/sim/sim/async_barrier.h
 * \brief mp_31's async barriers: integer ids 1..63 with a phase bit, counts of warp arrivals and transaction bytes
 *        (docs/ASYNC_MODEL.md section 2; MUSA_FACTS.md, Data movement and synchronisation).
 *
 * Prototypes, as device code calls them (the port's tl_templates/musa/barrier.h):
 *   void __musa_async_bar_record(uint32_t n);                          // ids 1..n may be used; every thread
 *   void __musa_async_init_arrival(uint32_t id, uint32_t warps, uint32_t phase);
 *   void __musa_async_add_trans(uint32_t id, uint32_t bytes);
 *   uint32_t __musa_async_arrive(uint32_t id);                         // returns the phase bit it arrived in
 *   void __musa_async_arrive_add_trans(uint32_t id, uint32_t bytes);   // add_trans, then arrive
 *   void __musa_async_wait(uint32_t id, uint32_t parity);              // until the phase of that parity completed
 *
 * An arrival is per warp: the k-th call of each lane of a warp is the warp's k-th arrival. A lane that calls waits
 * until every live lane of its warp has made the same call or nothing else in the block can run: then the arrival
 * counts once and the calling lanes resume (of a warp's arrivals pending on several barriers then, the one the
 * fewest lanes joined: those lanes are in a branch the others wait behind, see OnQuiescent). So `arrive` by all
 * lanes and `if (lane == 0) arrive` both count one arrival, and the lanes' work before an all-lanes arrival is done
 * before it counts, as in a warp that executes in lockstep [I]. A phase completes when its pending arrivals reach
 * zero and the bytes of the TME loads issued on it equal the bytes added with add_trans; loads complete, and their
 * data lands, only when a thread waits for that phase (as late as possible: a kernel that reads the tile before
 * waiting reads poison). Arrivals beyond a phase's count go to the next phase. A wait that can never return is a
 * deadlock naming the barrier, its phase, its pending arrivals and bytes, and where each thread waits.
 *
 * Checked mode: accesses a warp made before its arrival are ordered before those of threads after a wait that
 * saw the phase complete (race_detector.h, AsyncOrder); a use of a barrier initialised by another thread with no
 * block barrier in between is an error.
 */
#pragma once

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "bit_count.h"
#include "config.h"
#include "profile.h"
#include "race_detector.h"
#include "scheduler.h"
#include "thread_state.h"
#include "unavailable_builtin.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {
namespace async {

inline constexpr uint32_t kMaxBarriers = 63;
// How far (in arrivals) a lane may lag behind its warp and still learn the phase its arrival counted in.
inline constexpr uint32_t kPhaseHistory = 64;

/*! \brief A copy that completes on a barrier: its transaction bytes, and what to do when it lands. */
struct BarrierLoad {
  uint64_t bytes = 0;
  uint32_t thread = 0;  // the issuing thread
  const char* what = "";
  const char* file = "";
  int line = 0;
  std::function<void(BlockRunner&)> land;  // writes the data (and tells checked mode)
};

// The model's body, compiled once in the runtime (async_barrier_outlined.h; visibility.h, TL_SIM_OUTLINED). The
// built-ins that can make the thread wait (arrive, wait) mark the kernel's library themselves (TL_SIM_MAY_BLOCK),
// since the waiting code is in the runtime.
TL_SIM_OUTLINED void Record(uint32_t n, const char* file, int line) TL_SIM_OUTLINED_AS("async_record");
TL_SIM_OUTLINED void InitArrival(uint32_t id, uint32_t warps, uint32_t phase, const char* file, int line)
    TL_SIM_OUTLINED_AS("async_init_arrival");
TL_SIM_OUTLINED void AddTrans(uint32_t id, uint32_t bytes, const char* file, int line)
    TL_SIM_OUTLINED_AS("async_add_trans");
TL_SIM_OUTLINED uint32_t Arrive(uint32_t id, const char* file, int line) TL_SIM_OUTLINED_AS("async_arrive");
TL_SIM_OUTLINED void Wait(uint32_t id, uint32_t parity, const char* file, int line) TL_SIM_OUTLINED_AS("async_wait");
/*! \brief A copy (TME load) issued on barrier `id` by the running thread: its bytes count on the current phase. */
TL_SIM_OUTLINED void IssueLoad(uint32_t id, BarrierLoad&& load) TL_SIM_OUTLINED_AS("async_issue_load");

}  // namespace async
}  // namespace tl_sim
#pragma GCC visibility pop

#if !defined(TL_SIM_LINK_RUNTIME)  // a linked kernel library calls the runtime's
#include "async_barrier_outlined.h"
#endif

#pragma GCC visibility push(hidden)
#if __MUSA_ARCH__ >= 310
// The trailing parameters capture the call site for error messages; kernels call these without them.
inline void __musa_async_bar_record(uint32_t n, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  tl_sim::async::Record(n, file, line);
}
inline void __musa_async_init_arrival(uint32_t id, uint32_t warps, uint32_t phase,
                                      const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  tl_sim::async::InitArrival(id, warps, phase, file, line);
}
inline void __musa_async_add_trans(uint32_t id, uint32_t bytes, const char* file = __builtin_FILE(),
                                   int line = __builtin_LINE()) {
  tl_sim::async::AddTrans(id, bytes, file, line);
}
inline uint32_t __musa_async_arrive(uint32_t id, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  TL_SIM_MAY_BLOCK();
  return tl_sim::async::Arrive(id, file, line);
}
inline void __musa_async_arrive_add_trans(uint32_t id, uint32_t bytes, const char* file = __builtin_FILE(),
                                          int line = __builtin_LINE()) {
  TL_SIM_MAY_BLOCK();
  tl_sim::async::AddTrans(id, bytes, file, line);
  (void)tl_sim::async::Arrive(id, file, line);
}
inline void __musa_async_wait(uint32_t id, uint32_t parity, const char* file = __builtin_FILE(),
                              int line = __builtin_LINE()) {
  TL_SIM_MAY_BLOCK();
  tl_sim::async::Wait(id, parity, file, line);
}
#else
TL_SIM_UNAVAILABLE_BUILTIN(__musa_async_bar_record, "mp_31/mp_32 (async barriers)")
TL_SIM_UNAVAILABLE_BUILTIN(__musa_async_init_arrival, "mp_31/mp_32 (async barriers)")
TL_SIM_UNAVAILABLE_BUILTIN(__musa_async_add_trans, "mp_31/mp_32 (async barriers)")
TL_SIM_UNAVAILABLE_BUILTIN(__musa_async_arrive, "mp_31/mp_32 (async barriers)")
TL_SIM_UNAVAILABLE_BUILTIN(__musa_async_arrive_add_trans, "mp_31/mp_32 (async barriers)")
TL_SIM_UNAVAILABLE_BUILTIN(__musa_async_wait, "mp_31/mp_32 (async barriers)")
#endif
#pragma GCC visibility pop
