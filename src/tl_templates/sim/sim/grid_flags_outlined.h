/*!
 * \file tl_templates/sim/sim/grid_flags_outlined.h
 * \brief The body of grid_flags.h: the launch's record of finished blocks and published flags, and the blocking
 *        wait. Compiled once into the simulator runtime (and into a kernel library that carries its own
 *        simulator), never in a kernel library that links the runtime (visibility.h, TL_SIM_OUTLINED). Included by
 *        grid_flags.h only.
 */
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "grid_flags.h"
#include "profile.h"
#include "scheduler.h"
#include "thread_state.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {

/*! \brief One launch's inter-block flags: which runs have finished, and the clock of each flag's latest publish. */
class GridFlags {
 public:
  /*! \brief A launch of `runs` blocks (of a grid of `total`) starts; `failed` is set when a block fails. */
  void Start(uint64_t runs, uint64_t total, const std::atomic<bool>* failed) {
    runs_ = runs;
    total_ = total;
    failed_ = failed;
    finished_.assign(runs, 0);
    abandoned_.assign(runs, 0);
  }
  /*! \brief Run `run` ended (successfully or not): waits of later runs may now find their flag never set. */
  void Finish(uint64_t run) {
    std::lock_guard<std::mutex> lock(mu_);
    if (run < finished_.size()) finished_[run] = 1;
    while (prefix_ < finished_.size() && finished_[prefix_] != 0) ++prefix_;
    changed_.notify_all();
  }
  /*! \brief A block failed: waiting blocks give up. */
  void Wake() {
    std::lock_guard<std::mutex> lock(mu_);
    changed_.notify_all();
  }
  /*! \brief Whether run `run` gave up its wait because another block failed (its error is not the launch's). */
  bool Abandoned(uint64_t run) {
    std::lock_guard<std::mutex> lock(mu_);
    return run < abandoned_.size() && abandoned_[run] != 0;
  }

  void Arrive(int* flag, double cycle) {
    std::lock_guard<std::mutex> lock(mu_);
    __atomic_fetch_add(flag, 1, __ATOMIC_RELEASE);
    auto it = std::find_if(published_.begin(), published_.end(), [&](const Published& p) { return p.flag == flag; });
    if (it == published_.end()) published_.push_back(Published{flag, cycle});
    else it->cycle = std::max(it->cycle, cycle);
    changed_.notify_all();
  }

  /*! \brief Block until `*flag >= expected`: the flag's latest publish cycle; throws nothing, fails the block. */
  double Wait(const int* flag, int expected, int line) {
    OsThreadState& t = g_thread;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      const bool earlier_done = prefix_ >= t.block_run;  // every run before this one has finished
      const int held = __atomic_load_n(flag, __ATOMIC_ACQUIRE);
      if (held >= expected) break;
      if (failed_ != nullptr && failed_->load(std::memory_order_relaxed)) {
        abandoned_[t.block_run] = 1;
        lock.unlock();
        t.block->Fail(musaErrorLaunchFailure, "abandoned its flag wait (line %d): another block failed", line);
      }
      if (earlier_done) {
        const bool sampled = runs_ != total_;
        lock.unlock();
        t.block->Fail(musaErrorLaunchFailure,
                      "waits (line %d of the kernel source) for the flag at %p to reach %d, which holds %d, and every "
                      "earlier block has finished: no earlier block publishes it. Blocks run in order in the "
                      "simulator, so a flag that no block, or only a later block, publishes is never seen%s",
                      line, static_cast<const void*>(flag), expected, held,
                      sampled ? " (this launch profiles a sample of the grid's blocks: the publisher may be outside "
                                "the sample; profile a kernel with inter-block flags whole)"
                              : "");
      }
      t.block->NoteProgress();  // waiting on other workers' blocks is not a stall of this worker
      changed_.wait_for(lock, std::chrono::milliseconds(20));
    }
    double cycle = 0;
    for (const Published& p : published_)
      if (p.flag == flag) cycle = p.cycle;
    return cycle;
  }

 private:
  struct Published {
    const int* flag;
    double cycle;
  };
  std::mutex mu_;
  std::condition_variable changed_;
  uint64_t runs_ = 0, total_ = 0, prefix_ = 0;
  const std::atomic<bool>* failed_ = nullptr;
  std::vector<uint8_t> finished_, abandoned_;
  std::vector<Published> published_;
};

TL_SIM_OUTLINED_DEF void GridFlagArrive(int* flag, int line) {
  OsThreadState& t = g_thread;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (t.grid_flags == nullptr) {  // outside a launch's block (never from generated code)
    __atomic_fetch_add(flag, 1, __ATOMIC_RELEASE);
    return;
  }
  (void)line;
  const double cycle = t.profile != nullptr ? t.profile->Settle(t.block->current().linear) : 0.0;
  t.grid_flags->Arrive(flag, cycle);
}

TL_SIM_OUTLINED_DEF void GridFlagWait(const int* flag, int expected, int line) {
  OsThreadState& t = g_thread;
  if (t.grid_flags == nullptr) {
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < expected) {
    }
    return;
  }
  const double published = t.grid_flags->Wait(flag, expected, line);
  if (t.profile != nullptr)
    t.profile->WaitUntil(t.block->current().linear, published + profile::kTiming.global_latency,
                         profile::kNumCounters);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

}  // namespace tl_sim
#pragma GCC visibility pop
