/*!
 * \file tl_templates/sim/sim/grid_barrier.h
 * \brief The grid barrier of a cooperative launch: `cooperative_groups::this_grid().sync()` (T.sync_grid), launched
 *        with musaLaunchCooperativeKernel.
 *
 * A cooperative launch runs every block of the grid at once, each on an OS thread of its own (launch.h), as a card
 * keeps every block resident. The grid barrier is a block barrier whose completion (the exchange, run by the
 * block's last thread to arrive, before any thread of the block resumes) waits, blocking the block's OS thread,
 * until every block of the grid has completed its own: as CUDA's grid.sync() is a block barrier, one arrival per
 * block on a counter in global memory, a spin until the count is full, and a block barrier again. The mutex that
 * counts the blocks orders every write before the barrier, in any block, before every access after it.
 *
 * Strict, and never a hang: the block barrier's own checks hold (a thread that exits, or reaches another barrier,
 * while others of its block wait at this one fails the block); a block that ends while other blocks wait at a grid
 * barrier fails every waiting block with a deadlock error naming the barrier's line and the block that ended; a
 * failing block makes the others give up their wait (its error is the launch's); the watchdog counts a waiting
 * worker's wake-ups as progress. `this_grid().sync()` in a kernel launched with plain musaLaunchKernel is an
 * error naming the line (on a card it is undefined: blocks that are not resident never arrive).
 *
 * The cycle model (profile.h): the blocks leave the barrier together, at the latest arrival's clock plus the
 * global latency (the count lives in global memory); a grid of one wave starts every block at cycle 0.
 *
 * The body (the launch's count of arrivals, the blocking wait) is the runtime's (grid_barrier_outlined.h).
 */
#pragma once

#include <cstdint>

#include "scheduler.h"
#include "thread_state.h"
#include "visibility.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

/*! \brief The grid barrier's exchange: the block's threads have all arrived; wait for the other blocks. */
TL_SIM_OUTLINED void GridSyncExchange(BlockRunner& block, Rendezvous& rv) TL_SIM_OUTLINED_AS("grid_sync_exchange");
/*! \brief The running kernel was not launched cooperatively: fail the block naming the barrier. */
[[noreturn]] TL_SIM_OUTLINED void GridSyncNotCooperative(BlockRunner& block, const char* file, int line)
    TL_SIM_OUTLINED_AS("grid_sync_not_cooperative");

inline constexpr Collective kGridSync{"cooperative_groups::this_grid().sync()", &GridSyncExchange};

inline void GridSync(const char* file, int line) {
  BlockRunner& block = CurrentBlock("cooperative_groups::this_grid().sync()");
  if (g_thread.grid_barrier == nullptr) GridSyncNotCooperative(block, file, line);
  block.Arrive(kGridSync, Group::kBlock, block.all_threads(), CollectiveSlot{}, file, line);
}

}  // namespace tl_sim

// The subset of <cooperative_groups.h> that generated kernels use.
namespace cooperative_groups {
class grid_group {
 public:
  // The trailing parameters capture the call site for error messages; kernels call it with no arguments.
  void sync(const char* file = __builtin_FILE(), int line = __builtin_LINE()) const { tl_sim::GridSync(file, line); }
  bool is_valid() const { return tl_sim::g_thread.grid_barrier != nullptr; }
};
inline grid_group this_grid() { return grid_group(); }
}  // namespace cooperative_groups
#pragma GCC visibility pop

#if !defined(TL_SIM_LINK_RUNTIME)  // a linked kernel library calls the runtime's
#include "grid_barrier_outlined.h"
#endif
