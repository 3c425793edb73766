/*!
 * \file tl_templates/sim/sim/grid_barrier_outlined.h
 * \brief The body of grid_barrier.h: a cooperative launch's count of arrivals at the grid barrier, the blocking
 *        wait, and how many blocks the arch holds resident. Compiled once into the simulator runtime (and into a
 *        kernel library that carries its own simulator), never in a kernel library that links the runtime
 *        (visibility.h, TL_SIM_OUTLINED). Included by grid_barrier.h only.
 */
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "config.h"
#include "grid_barrier.h"
#include "profile.h"
#include "scheduler.h"
#include "thread_state.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

/*!
 * \brief The residency figures per MP of the arch, from the build (-DTL_SIM_MP_*, written from
 *        tilelang_musa/profiler/arch_figures.py, where each figure's source is given: the S5000's 56 MPs are
 *        Moore Threads' own kernels' figure, the S4000's 32 and the per-MP limits are assumptions). Registers are
 *        not counted (the simulator does not know a kernel's): a card may hold fewer blocks than this.
 */
struct Residency {
  uint64_t mps;
  uint64_t threads_per_mp;
  uint64_t shared_bytes_per_mp;
  uint64_t blocks_per_mp;
};
#ifdef TL_SIM_MP_COUNT
inline constexpr bool kResidencyKnown = true;
inline constexpr Residency kResidency{TL_SIM_MP_COUNT, TL_SIM_MP_THREADS, TL_SIM_MP_SHARED_BYTES, TL_SIM_MP_BLOCKS};
#else
inline constexpr bool kResidencyKnown = false;
inline constexpr Residency kResidency{0, 0, 0, 0};
#endif

/*! \brief How many blocks of `threads` threads and `shared_bytes` of shared memory the device holds at once
 *         (0 when the build has no residency figures). */
inline uint64_t ResidentBlocks(uint64_t threads, uint64_t shared_bytes) {
  const uint64_t warps = (threads + kWarpSize - 1) / kWarpSize;
  uint64_t per_mp = std::min<uint64_t>(kResidency.blocks_per_mp, kResidency.threads_per_mp / (warps * kWarpSize));
  if (shared_bytes > 0) per_mp = std::min<uint64_t>(per_mp, kResidency.shared_bytes_per_mp / shared_bytes);
  return per_mp * kResidency.mps;
}

/*! \brief One cooperative launch's grid barrier: the blocks that arrived at the current one, the blocks that ended. */
class GridBarrier {
 public:
  GridBarrier(uint64_t blocks, dim3 grid, const std::atomic<bool>* failed)
      : blocks_(blocks), grid_(grid), failed_(failed), abandoned_(blocks, 0) {}

  /*! \brief Block `id` ended (successfully or not): blocks waiting at a barrier it never reached cannot pass. */
  void Finish(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_++ == 0) first_finished_ = id;
    changed_.notify_all();
  }
  /*! \brief A block failed: waiting blocks give up. */
  void Wake() {
    std::lock_guard<std::mutex> lock(mu_);
    changed_.notify_all();
  }
  /*! \brief Whether block `id` gave up its wait because another block failed (its error is not the launch's). */
  bool Abandoned(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    return id < abandoned_.size() && abandoned_[id] != 0;
  }

  /*! \brief The running block (linear index `id`) arrives at the barrier of line `line` at clock `cycle` and waits
   *         for every other block: the latest arrival's clock. Fails the block instead of waiting forever. */
  double Wait(BlockRunner& block, uint64_t id, const char* file, int line, double cycle) {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t generation = generation_;
    latest_ = arrived_ == 0 ? cycle : std::max(latest_, cycle);
    if (++arrived_ == blocks_) {
      arrived_ = 0;
      ++generation_;
      released_ = latest_;
      changed_.notify_all();
      return released_;
    }
    for (;;) {
      // released_ stays this generation's until the next one completes, which needs this block's arrival
      if (generation_ != generation) return released_;
      // a deadlock, once seen, is every waiting block's error (the launch reports the lowest block's)
      if (deadlock_.seen) Deadlock(block, lock, file, line);
      if (failed_->load(std::memory_order_relaxed)) {  // before the count: a block that gave up counts as ended
        abandoned_[id] = 1;
        lock.unlock();
        block.Fail(musaErrorLaunchFailure, "abandoned its wait at the grid barrier (%s:%d): another block failed",
                   SourceName(file), line);
      }
      if (finished_ > 0 && arrived_ + finished_ == blocks_) {
        deadlock_ = {true, arrived_, finished_, first_finished_};
        Deadlock(block, lock, file, line);
      }
      block.NoteProgress();  // waiting on other blocks is not a stall of this worker (the watchdog)
      changed_.wait_for(lock, std::chrono::milliseconds(20));
    }
  }

 private:
  [[noreturn]] void Deadlock(BlockRunner& block, std::unique_lock<std::mutex>& lock, const char* file, int line) {
    const uint64_t waiting = deadlock_.waiting, ended = deadlock_.ended, first = deadlock_.first;
    lock.unlock();
    const unsigned gx = grid_.x, gy = grid_.y;
    block.Fail(musaErrorLaunchFailure,
               "deadlock at the grid barrier cooperative_groups::this_grid().sync() (%s:%d): %llu of %llu blocks "
               "wait there and %llu ended without reaching it, block (%u,%u,%u) first; every thread of every block "
               "must reach each grid barrier",
               SourceName(file), line, static_cast<unsigned long long>(waiting),
               static_cast<unsigned long long>(blocks_), static_cast<unsigned long long>(ended),
               static_cast<unsigned>(first % gx), static_cast<unsigned>(first / gx % gy),
               static_cast<unsigned>(first / (uint64_t{gx} * gy)));
  }

  const uint64_t blocks_;
  const dim3 grid_;
  const std::atomic<bool>* failed_;
  std::mutex mu_;
  std::condition_variable changed_;
  uint64_t arrived_ = 0, finished_ = 0, first_finished_ = 0, generation_ = 0;  // under mu_
  double latest_ = 0, released_ = 0;                                          // under mu_
  std::vector<uint8_t> abandoned_;                                            // per block, under mu_
  struct {
    bool seen = false;
    uint64_t waiting = 0, ended = 0, first = 0;  // when it was seen
  } deadlock_;  // under mu_
};

TL_SIM_OUTLINED_DEF void GridSyncExchange(BlockRunner& block, Rendezvous& rv) {
  OsThreadState& t = g_thread;
  const uint64_t id = t.block_idx.x + uint64_t{t.grid_dim.x} * (t.block_idx.y + uint64_t{t.grid_dim.y} * t.block_idx.z);
  // the block barrier's MeetClocks has brought every thread of the block to one clock
  const double arrived = t.profile != nullptr ? t.profile->Settle(rv.base) : 0.0;
  const double released = t.grid_barrier->Wait(block, id, rv.file, rv.line, arrived);
  if (t.profile != nullptr) {
    rv.members.ForEach([&](uint32_t i) {
      t.profile->WaitUntil(rv.base + i, released + profile::kTiming.global_latency, profile::k_barrier_stall_cycles);
    });
  }
}

TL_SIM_OUTLINED_DEF void GridSyncNotCooperative(BlockRunner& block, const char* file, int line) {
  block.Fail(musaErrorLaunchFailure,
             "cooperative_groups::this_grid().sync() (%s:%d) in a kernel not launched cooperatively: a grid barrier "
             "needs musaLaunchCooperativeKernel, which keeps every block resident (on a card the blocks not yet "
             "running never arrive)",
             SourceName(file), line);
}

}  // namespace tl_sim
#pragma GCC visibility pop
