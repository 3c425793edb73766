/*!
 * \file tl_templates/sim/sim/grid_flags.h
 * \brief Flags in global memory that one block publishes and another block of the same launch waits for
 *        (tl::grid_flag_arrive / tl::grid_flag_wait, musa/grid_flag.h): a stream-K GEMM's partial tiles.
 *
 * The simulator runs a grid's blocks in order: workers claim them by increasing index (run order: the block index,
 * or the sample's order under TILELANG_SIM_PROFILE_BLOCKS), each worker runs its block to the end. So a block may
 * wait for a flag that an EARLIER block publishes: the waiting OS thread blocks until the flag reaches the value,
 * or until every earlier block has finished without it reaching the value, which is an error naming the kernel,
 * the block, the flag's address, the value awaited and held, and the wait's line: a flag nobody sets, or one a
 * later block sets (a dependence the in-order simulator cannot run, and a card runs only when every block is
 * resident at once). A wait never hangs the launch: a failing block elsewhere ends it, and the watchdog counts a
 * waiting worker's wake-ups as progress.
 *
 * The cycle model (profile.h): a publish records its thread's clock on the flag; a wait resumes the waiting
 * thread no earlier than the latest publish's clock plus the global latency (blocks of one wave start at cycle 0,
 * so the clocks of two blocks compare: a persistent grid is one wave).
 *
 * The body (the launch's record of finished blocks and published clocks, the blocking wait) is the runtime's
 * (grid_flags_outlined.h; visibility.h, TL_SIM_OUTLINED).
 */
#pragma once

#include <cstdint>

#include "visibility.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

/*! \brief The running thread adds 1 to `*flag` with release order (its earlier global stores are visible to a
 *         thread that sees the sum). */
TL_SIM_OUTLINED void GridFlagArrive(int* flag, int line) TL_SIM_OUTLINED_AS("grid_flag_arrive");
/*! \brief The running thread waits until `*flag >= expected`, then acquires (the publishers' stores before their
 *         arrivals are visible to it). */
TL_SIM_OUTLINED void GridFlagWait(const int* flag, int expected, int line) TL_SIM_OUTLINED_AS("grid_flag_wait");

}  // namespace tl_sim
#pragma GCC visibility pop

#if !defined(TL_SIM_LINK_RUNTIME)  // a linked kernel library calls the runtime's
#include "grid_flags_outlined.h"
#endif
