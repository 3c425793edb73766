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
#include <unordered_map>
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
  /*! \brief A launch of `runs` blocks (of a grid of `total`) of `threads` threads starts; `failed` is set when a
   *         block fails. `check`: checked mode, which tracks each thread's publications and acquisitions. */
  void Start(uint64_t runs, uint64_t total, uint32_t threads, const std::atomic<bool>* failed, bool check) {
    static std::atomic<uint64_t> launches{0};
    runs_ = runs;
    total_ = total;
    threads_ = threads;
    failed_ = failed;
    finished_.assign(runs, 0);
    abandoned_.assign(runs, 0);
    published_.clear();
    arrivals_.clear();
    prefix_ = 0;
    waiters_ = 0;
    // checked mode tracks publication per thread of the launch, up to a million threads (else not at all)
    check_ = check && runs * threads <= (uint64_t{1} << 20);
    if (check_) {
      launch_ = (launches.fetch_add(1) % 0xFFFF) + 1;
      releases_.assign(runs * threads, 0);
      acquired_.assign(runs * threads, {});
    }
  }

  // ---- checked mode: publication. A store to a tracked global range (poisoned_globals.h) records a stamp: the
  // launch, the storing thread and how many times it had published (arrived on a flag) before the store. A load in
  // another block of that launch must come from a thread that waited on a flag the writer arrived on AFTER the
  // store: else it is a missing acquire (it waited on no flag of the writer) or a late publish (the writer's
  // arrival that it waited for came before the store). On hardware either reads the data late, or not at all.

  bool checked() const { return check_; }
  uint64_t Thread() const { return g_thread.block_run * threads_ + g_thread.block->current().linear; }
  /*! \brief The running thread's stamp for a store now. */
  uint64_t Stamp() const {
    const uint64_t me = Thread();
    const uint64_t count = std::min<uint64_t>(__atomic_load_n(&releases_[me], __ATOMIC_RELAXED), kCountMask);
    return (launch_ << 48) | (((me + 1) & 0xFFFFFFFull) << 20) | count;
  }
  /*! \brief The running thread loads a byte whose last write has `stamp`: fails the block where the write was not
   *         published to it. */
  void CheckRead(uint64_t stamp, const char* name, int64_t element, int line) {
    if (stamp == 0 || (stamp >> 48) != launch_) return;  // unrecorded, or an earlier launch's (an earlier kernel)
    const uint64_t writer = ((stamp >> 20) & 0xFFFFFFFull) - 1, before = stamp & kCountMask;
    if (writer / threads_ == g_thread.block_run) return;  // the same block: the race detector's business
    uint64_t got = 0;
    for (const auto& a : acquired_[Thread()])
      if (a.first == writer) got = std::max(got, a.second);
    if (got > before) return;
    const unsigned wb = static_cast<unsigned>(writer / threads_), wt = static_cast<unsigned>(writer % threads_);
    if (got == 0)
      g_thread.block->Fail(musaErrorLaunchFailure,
                           "global load of `%s` at element %lld (line %d) reads what thread %u of block %u wrote, "
                           "without waiting on a flag that thread published (tl::grid_flag_wait): a missing acquire, "
                           "which on a card may read the data before it arrives",
                           name, static_cast<long long>(element), line, wt, wb);
    g_thread.block->Fail(musaErrorLaunchFailure,
                         "global load of `%s` at element %lld (line %d) reads what thread %u of block %u wrote after "
                         "its publish that this thread waited for (tl::grid_flag_arrive before the store): a late "
                         "publish, which on a card may be read before the data arrives",
                         name, static_cast<long long>(element), line, wt, wb);
  }
  /*! \brief Run `run` ended (successfully or not): waits of later runs may now find their flag never set. Every
   *         block of every launch passes here: no lock unless a block is waiting. */
  void Finish(uint64_t run) {
    if (run < finished_.size()) __atomic_store_n(&finished_[run], 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&waiters_, __ATOMIC_SEQ_CST) == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
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
    if (check_) {
      const uint64_t me = Thread();
      const uint64_t count = __atomic_add_fetch(&releases_[me], 1, __ATOMIC_RELAXED);
      arrivals_[flag].emplace_back(me, count);
    }
    __atomic_fetch_add(flag, 1, __ATOMIC_RELEASE);
    auto it = published_.emplace(flag, cycle).first;
    it->second = std::max(it->second, cycle);
    changed_.notify_all();
  }

  /*! \brief Block until `*flag >= expected`: the flag's latest publish cycle; throws nothing, fails the block. */
  double Wait(const int* flag, int expected, int line) {
    OsThreadState& t = g_thread;
    std::unique_lock<std::mutex> lock(mu_);
    __atomic_add_fetch(&waiters_, 1, __ATOMIC_SEQ_CST);  // taken back before every exit (Fail does not unwind)
    for (;;) {
      while (prefix_ < finished_.size() && __atomic_load_n(&finished_[prefix_], __ATOMIC_SEQ_CST) != 0) ++prefix_;
      const bool earlier_done = prefix_ >= t.block_run;  // every run before this one has finished
      const int held = __atomic_load_n(flag, __ATOMIC_ACQUIRE);
      if (held >= expected) break;
      if (failed_ != nullptr && failed_->load(std::memory_order_relaxed)) {
        abandoned_[t.block_run] = 1;
        __atomic_sub_fetch(&waiters_, 1, __ATOMIC_SEQ_CST);
        lock.unlock();
        t.block->Fail(musaErrorLaunchFailure, "abandoned its flag wait (line %d): another block failed", line);
      }
      if (earlier_done) {
        const bool sampled = runs_ != total_;
        __atomic_sub_fetch(&waiters_, 1, __ATOMIC_SEQ_CST);
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
    __atomic_sub_fetch(&waiters_, 1, __ATOMIC_SEQ_CST);
    const auto published = published_.find(flag);
    const double cycle = published == published_.end() ? 0.0 : published->second;
    if (check_) {
      const auto arrived = arrivals_.find(flag);
      if (arrived != arrivals_.end()) {
        auto& mine = acquired_[Thread()];
        mine.insert(mine.end(), arrived->second.begin(), arrived->second.end());
      }
    }
    return cycle;
  }

 private:
  static constexpr uint64_t kCountMask = (uint64_t{1} << 20) - 1;
  bool check_ = false;
  uint64_t launch_ = 0;
  uint32_t threads_ = 1;
  std::vector<uint64_t> releases_;  // per thread of the launch: its arrivals so far
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> acquired_;  // per thread: (writer, its arrivals) seen
  // per flag: the arriving threads, each with its publications so far (this one included)
  std::unordered_map<const int*, std::vector<std::pair<uint64_t, uint64_t>>> arrivals_;
  std::mutex mu_;
  std::condition_variable changed_;
  uint64_t runs_ = 0, total_ = 0, prefix_ = 0;  // prefix_: runs [0, prefix_) have finished (under mu_)
  uint64_t waiters_ = 0;                          // threads in Wait
  const std::atomic<bool>* failed_ = nullptr;
  std::vector<uint8_t> finished_, abandoned_;
  std::unordered_map<const int*, double> published_;  // per flag: its latest arrival's cycle
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
