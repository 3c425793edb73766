/*!
 * \file tl_templates/sim/sim/async_barrier_outlined.h
 * \brief The body of async_barrier.h's model: the barriers' state, arrivals, phases, waits and the loads that land
 *        on them. Compiled once into the simulator runtime (and into a kernel library that carries its own
 *        simulator), never in a kernel library that links the runtime (visibility.h, TL_SIM_OUTLINED). Included by
 *        async_barrier.h only.
 */
#pragma once

#include "async_barrier.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {
namespace async {

/*! \brief One warp's arrivals on one barrier. */
struct WarpArrivals {
  uint32_t counted = 0;  // arrivals counted so far
  uint32_t joined = 0;   // lanes (bit per lane) that made call `counted + 1`, not yet counted
  uint8_t phase_of[kPhaseHistory] = {};  // the phase bit arrival k counted in, at k % kPhaseHistory
};

struct Barrier {
  bool initialised = false;
  uint32_t expected_warps = 0, pending_warps = 0;
  uint32_t early_arrivals = 0;  // arrivals while only bytes were pending: they count for the next phase
  uint32_t phase = 0;           // the current phase's parity
  uint64_t completed = 0;       // phases completed since initialisation
  uint64_t expected_bytes = 0;  // added by add_trans in the current phase
  uint64_t load_bytes = 0;      // of the loads issued on the current phase
  std::vector<BarrierLoad> loads;
  std::vector<uint32_t> lane_calls;   // per thread: its arrive calls
  std::vector<WarpArrivals> warps;    // per warp
  std::vector<uint32_t> waiters;      // threads blocked in wait
  std::vector<uint32_t> clock, completed_clock;  // checked mode (AsyncOrder): releases into the phase
  // The cycle model (profile.h): when the current phase's arrivals and loads are all in, when the next phase's
  // early arrivals are, and when the last completed phase was.
  double ready_cycle = 0, early_cycle = 0, completed_cycle = 0;
  uint32_t init_thread = 0;
  uint64_t init_block_epoch = 0;
  const char* init_file = "";
  int init_line = 0;
};

struct Barriers final : BlockExtension {
  explicit Barriers(uint32_t thread_count) : threads(thread_count), wait_parity(thread_count, 0) {}
  uint32_t threads;
  int32_t recorded = -1;  // n of __musa_async_bar_record; -1 before it
  const char* record_file = "";
  int record_line = 0;
  Barrier barriers[kMaxBarriers + 1];  // by id; 0 unused
  std::vector<uint32_t> wait_parity;   // per thread blocked in wait: the parity it waits for

  /*! \brief The highest id a use may name (Use refuses the others, so they never hold state). */
  uint32_t last_id() const { return recorded < 0 ? 0 : static_cast<uint32_t>(recorded); }

  // Declared inline (defined below): a virtual function declared non-inline in the class would be its key
  // function, which makes every translation unit that includes this header emit the vtable and all it reaches.
  inline bool OnQuiescent(BlockRunner& block) override;
  inline void OnThreadExit(BlockRunner& block, Fiber& thread) override;
  inline void DescribeWaits(BlockRunner& block) override;
};

inline Barriers& GetBarriers(BlockRunner& block) {
  std::unique_ptr<BlockExtension>& slot = block.extension(ExtensionKind::kAsyncBarrier);
  if (slot == nullptr) slot.reset(new Barriers(block.thread_count()));
  return *static_cast<Barriers*>(slot.get());
}

inline AsyncOrder* OrderOf(BlockRunner& block) { return block.checked() ? &GetAsyncOrder(block) : nullptr; }

/*! \brief The barrier `id` for a use by the running thread, after the checks every use shares. */
inline Barrier& Use(BlockRunner& block, uint32_t id, const char* what, const char* file, int line,
                    bool initialising = false) {
  Barriers& all = GetBarriers(block);
  // SourceName(file) only on a failure: this runs at every barrier operation of every thread
  if (id < 1 || id > kMaxBarriers)
    block.Fail(musaErrorLaunchFailure, "%s (%s:%d): barrier id %u is not in 1..%u", what, SourceName(file), line, id,
               kMaxBarriers);
  if (all.recorded < 0)
    block.Fail(musaErrorLaunchFailure,
               "%s (%s:%d): barrier id %u is used, but the kernel did not start with __musa_async_bar_record(n)", what,
               SourceName(file), line, id);
  if (id > static_cast<uint32_t>(all.recorded))
    block.Fail(musaErrorLaunchFailure,
               "%s (%s:%d): barrier id %u is beyond the %d barriers __musa_async_bar_record (%s:%d) reserved", what,
               SourceName(file), line, id, all.recorded, SourceName(all.record_file), all.record_line);
  Barrier& b = all.barriers[id];
  if (initialising) return b;
  if (!b.initialised)
    block.Fail(musaErrorLaunchFailure, "%s (%s:%d): barrier %u is used before __musa_async_init_arrival", what,
               SourceName(file), line, id);
  const uint32_t me = block.current().linear;
  if (block.checked() && me != b.init_thread && block.epoch(Group::kBlock, 0) == b.init_block_epoch) {
    const uint3 init = block.fiber(b.init_thread).idx;
    block.Fail(musaErrorLaunchFailure,
               "%s (%s:%d): barrier %u was initialised by thread (%u,%u,%u) at %s:%d with no block barrier between "
               "that and this use",
               what, SourceName(file), line, id, init.x, init.y, init.z, SourceName(b.init_file), b.init_line);
  }
  return b;
}

/*! \brief Complete the current phase of barrier `id`: land its loads, flip the parity, re-arm, wake waiters. */
inline void Complete(BlockRunner& block, Barriers& all, uint32_t id) {
  Barrier& b = all.barriers[id];
  AsyncOrder* order = OrderOf(block);
  std::vector<BarrierLoad> loads;
  loads.swap(b.loads);
  for (BarrierLoad& load : loads) {
    load.land(block);
    if (order != nullptr) order->Release(load.thread / kWarpSize, b.clock);
  }
  b.phase ^= 1u;
  b.completed += 1;
  b.expected_bytes = b.load_bytes = 0;
  b.completed_cycle = b.ready_cycle;
  b.ready_cycle = b.early_cycle;
  b.early_cycle = 0;
  const uint32_t early = std::min(b.early_arrivals, b.expected_warps);
  b.early_arrivals -= early;
  b.pending_warps = b.expected_warps - early;
  if (order != nullptr) b.completed_clock = b.clock;
  std::vector<uint32_t> still;
  for (uint32_t t : b.waiters) {
    if (all.wait_parity[t] == b.phase) {
      still.push_back(t);
      continue;
    }
    if (order != nullptr) order->Acquire(t, b.completed_clock);
    if (g_thread.profile != nullptr)
      g_thread.profile->WaitUntil(t, b.completed_cycle, profile::k_async_barrier_stall_cycles);
    block.Wake(block.fiber(t));
  }
  b.waiters.swap(still);
}

/*! \brief Complete the phase if it can; loads may complete only when `loads_may_land` (someone waits for them). */
inline void TryComplete(BlockRunner& block, Barriers& all, uint32_t id, bool loads_may_land) {
  for (int guard = 0; guard < 4; ++guard) {  // early arrivals may complete the next phase at once
    Barrier& b = all.barriers[id];
    if (b.pending_warps > 0 || b.load_bytes != b.expected_bytes) return;
    if (b.load_bytes > 0 && !loads_may_land) return;
    Complete(block, all, id);
    loads_may_land = !b.waiters.empty();
  }
}

/*! \brief Count the pending arrival of warp `warp` on barrier `id` and wake its lanes. */
inline void CountArrival(BlockRunner& block, Barriers& all, uint32_t id, uint32_t warp) {
  Barrier& b = all.barriers[id];
  WarpArrivals& w = b.warps[warp];
  const uint32_t lanes = w.joined;
  w.joined = 0;
  w.counted += 1;
  if (AsyncOrder* order = OrderOf(block)) order->Release(warp, b.clock);
  double& ready = b.pending_warps == 0 ? b.early_cycle : b.ready_cycle;
  if (g_thread.profile != nullptr)
    for (uint32_t lane = 0; lane < 32; ++lane)
      if ((lanes >> lane) & 1u) ready = std::max(ready, g_thread.profile->Settle(warp * kWarpSize + lane));
  if (b.pending_warps == 0) {  // only bytes are pending: the arrival is the next phase's
    w.phase_of[w.counted % kPhaseHistory] = static_cast<uint8_t>(b.phase ^ 1u);
    b.early_arrivals += 1;
  } else {
    w.phase_of[w.counted % kPhaseHistory] = static_cast<uint8_t>(b.phase);
    b.pending_warps -= 1;
  }
  for (uint32_t lane = 0; lane < 32; ++lane)
    if ((lanes >> lane) & 1u) block.Wake(block.fiber(warp * kWarpSize + lane));
  TryComplete(block, all, id, !b.waiters.empty());
}

/*! \brief Whether every live lane of `warp` joined its pending arrival on `b`. */
inline bool AllLanesJoined(BlockRunner& block, const Barrier& b, uint32_t warp) {
  // A lane that joined waits until the arrival counts, so it has not exited: fewer joined lanes than live ones
  // means one is missing, without walking the lanes at each of the warp's calls.
  if (BitCount(b.warps[warp].joined) < block.live_in_warp(warp)) return false;
  const uint32_t extent = block.GroupExtent(Group::kWarp, warp);
  for (uint32_t lane = 0; lane < extent; ++lane) {
    if (block.fiber(warp * kWarpSize + lane).state == FiberState::kExited) continue;
    if (((b.warps[warp].joined >> lane) & 1u) == 0) return false;
  }
  return true;
}

inline bool Barriers::OnQuiescent(BlockRunner& block) {
  // A warp whose lanes wait in arrivals on different barriers has diverged. In lockstep the lanes inside the branch
  // (`if (tx == 768) { arrive(a); wait(a); }`, a one-thread TME load) finish it before the others reach the arrival
  // after it (`arrive(b)`), so only the arrival the fewest lanes joined counts now; the others count once those
  // lanes have come along [I: the branch is the narrower path].
  std::vector<int> fewest;
  for (uint32_t id = 1; id <= last_id(); ++id) {
    const Barrier& b = barriers[id];
    if (fewest.size() < b.warps.size()) fewest.resize(b.warps.size(), 33);
    for (uint32_t w = 0; w < b.warps.size(); ++w)
      if (b.warps[w].joined != 0) fewest[w] = std::min(fewest[w], static_cast<int>(BitCount(b.warps[w].joined)));
  }
  bool woke = false;
  for (uint32_t id = 1; id <= last_id(); ++id) {
    Barrier& b = barriers[id];
    for (uint32_t w = 0; w < b.warps.size(); ++w) {
      if (b.warps[w].joined == 0 || static_cast<int>(BitCount(b.warps[w].joined)) != fewest[w]) continue;
      CountArrival(block, *this, id, w);
      woke = true;
    }
  }
  return woke;
}

inline void Barriers::OnThreadExit(BlockRunner& block, Fiber& thread) {
  const uint32_t warp = thread.linear / kWarpSize;
  for (uint32_t id = 1; id <= last_id(); ++id) {
    Barrier& b = barriers[id];
    if (warp < b.warps.size() && b.warps[warp].joined != 0 && AllLanesJoined(block, b, warp))
      CountArrival(block, *this, id, warp);
  }
  if (block.live() > 0 || !block.checked()) return;
  for (uint32_t id = 1; id <= last_id(); ++id) {  // the block ends: every load should have landed
    const Barrier& b = barriers[id];
    if (b.loads.empty()) continue;
    const BarrierLoad& load = b.loads.front();
    const uint3 issuer = block.fiber(load.thread).idx;
    block.Fail(musaErrorLaunchFailure,
               "the block ends with %zu copies on barrier %u that never landed, the first (%s) issued at %s:%d by "
               "thread (%u,%u,%u): no thread waited for the phase they complete (missing __musa_async_wait?)",
               b.loads.size(), id, load.what, SourceName(load.file), load.line, issuer.x, issuer.y, issuer.z);
  }
}

inline void Barriers::DescribeWaits(BlockRunner& block) {
  for (uint32_t id = 1; id <= last_id(); ++id) {
    const Barrier& b = barriers[id];
    if (b.waiters.empty()) continue;
    block.Append(" async barrier %u in phase %" PRIu64 " (parity %u): %u of %u warp arrivals pending", id,
                 b.completed, b.phase, b.pending_warps, b.expected_warps);
    if (b.load_bytes > b.expected_bytes)
      block.Append(", TME loads of %" PRIu64 " bytes in flight but only %" PRIu64
                   " transaction bytes expected (add_trans)", b.load_bytes, b.expected_bytes);
    else if (b.expected_bytes > 0)
      block.Append(", %" PRIu64 " of %" PRIu64 " transaction bytes pending", b.expected_bytes - b.load_bytes,
                   b.expected_bytes);
    uint32_t shown = 0;
    for (uint32_t t : b.waiters) {
      if (shown++ == 3) {
        block.Append("; and %zu more threads", b.waiters.size() - 3);
        break;
      }
      const Fiber& f = block.fiber(t);
      block.Append("; thread (%u,%u,%u) waits for parity %u at %s:%d", f.idx.x, f.idx.y, f.idx.z, wait_parity[t],
                   SourceName(f.wait_file), f.wait_line);
    }
    block.Append(";");
  }
}

TL_SIM_OUTLINED_DEF void Record(uint32_t n, const char* file, int line) {
  BlockRunner& block = CurrentBlock("__musa_async_bar_record");
  Barriers& all = GetBarriers(block);
  if (n > kMaxBarriers)
    block.Fail(musaErrorLaunchFailure, "__musa_async_bar_record (%s:%d): %u barriers requested; ids 1..%u exist",
               SourceName(file), line, n, kMaxBarriers);
  if (all.recorded >= 0 && static_cast<uint32_t>(all.recorded) != n)
    block.Fail(musaErrorLaunchFailure, "__musa_async_bar_record (%s:%d): %u barriers, but %s:%d recorded %d",
               SourceName(file), line, n, SourceName(all.record_file), all.record_line, all.recorded);
  if (all.recorded < 0) {
    all.record_file = file;
    all.record_line = line;
  }
  all.recorded = static_cast<int32_t>(n);
}

TL_SIM_OUTLINED_DEF void InitArrival(uint32_t id, uint32_t warps, uint32_t phase, const char* file, int line) {
  const char* what = "__musa_async_init_arrival";
  BlockRunner& block = CurrentBlock(what);
  Barrier& b = Use(block, id, what, file, line, /*initialising=*/true);
  const char* where = SourceName(file);
  if (warps == 0)
    block.Fail(musaErrorLaunchFailure, "%s (%s:%d): barrier %u expects 0 warps; a phase needs at least one arrival",
               what, where, line, id);
  if (phase > 1)
    block.Fail(musaErrorLaunchFailure, "%s (%s:%d): barrier %u: initial phase %u is not 0 or 1", what, where, line,
               id, phase);
  bool busy = !b.waiters.empty() || b.expected_bytes != 0 || !b.loads.empty() || b.pending_warps != b.expected_warps;
  for (const WarpArrivals& w : b.warps) busy = busy || w.joined != 0;
  if (b.initialised && busy)
    block.Fail(musaErrorLaunchFailure,
               "%s (%s:%d): barrier %u is initialised again while in use (initialised at %s:%d, %u of %u arrivals "
               "pending)",
               what, where, line, id, SourceName(b.init_file), b.init_line, b.pending_warps, b.expected_warps);
  const uint32_t warp_count = (block.thread_count() + kWarpSize - 1) / kWarpSize;
  b = Barrier{};
  b.initialised = true;
  b.expected_warps = b.pending_warps = warps;
  b.phase = phase;
  b.lane_calls.assign(block.thread_count(), 0);
  b.warps.assign(warp_count, WarpArrivals{});
  b.init_thread = block.current().linear;
  b.init_block_epoch = block.epoch(Group::kBlock, 0);
  b.init_file = file;
  b.init_line = line;
  if (AsyncOrder* order = OrderOf(block)) {
    b.clock = order->NewClock();
    b.completed_clock = order->NewClock();
  }
}

TL_SIM_OUTLINED_DEF void AddTrans(uint32_t id, uint32_t bytes, const char* file, int line) {
  BlockRunner& block = CurrentBlock("__musa_async_add_trans");
  Barriers& all = GetBarriers(block);
  Barrier& b = Use(block, id, "__musa_async_add_trans", file, line);
  b.expected_bytes += bytes;
  TryComplete(block, all, id, !b.waiters.empty());
}

TL_SIM_OUTLINED_DEF uint32_t Arrive(uint32_t id, const char* file, int line) {
  const char* what = "__musa_async_arrive";
  BlockRunner& block = CurrentBlock(what);
  Barriers& all = GetBarriers(block);
  Barrier& b = Use(block, id, what, file, line);
  const uint32_t me = block.current().linear, warp = me / kWarpSize, lane = me % kWarpSize;
  const uint32_t k = ++b.lane_calls[me];
  WarpArrivals& w = b.warps[warp];
  if (k <= w.counted) {  // the warp's k-th arrival already counted (this lane came late)
    if (w.counted - k >= kPhaseHistory)
      block.Fail(musaErrorLaunchFailure,
                 "%s (%s:%d): this lane's call %u on barrier %u comes %u arrivals after its warp's; lanes of a warp "
                 "must arrive together",
                 what, SourceName(file), line, k, id, w.counted - k);
    return w.phase_of[k % kPhaseHistory];
  }
  w.joined |= 1u << lane;
  if (AllLanesJoined(block, b, warp)) {
    CountArrival(block, all, id, warp);
  } else {
    block.WaitForWake(what, file, line);  // CountArrival wakes the lanes
  }
  return b.warps[warp].phase_of[k % kPhaseHistory];
}

TL_SIM_OUTLINED_DEF void Wait(uint32_t id, uint32_t parity, const char* file, int line) {
  const char* what = "__musa_async_wait";
  BlockRunner& block = CurrentBlock(what);
  if (g_thread.profile != nullptr && block.current().linear % kWarpSize == 0)
    g_thread.profile->Add(profile::k_async_barrier_waits, 1);
  Barriers& all = GetBarriers(block);
  Barrier& b = Use(block, id, what, file, line);
  if (parity > 1)
    block.Fail(musaErrorLaunchFailure, "%s (%s:%d): barrier %u: parity %u is not 0 or 1", what, SourceName(file),
               line, id, parity);
  const uint32_t me = block.current().linear;
  if (b.phase == parity) TryComplete(block, all, id, /*loads_may_land=*/true);
  if (b.phase != parity) {
    if (AsyncOrder* order = OrderOf(block)) order->Acquire(me, b.completed_clock);
    if (g_thread.profile != nullptr)
      g_thread.profile->WaitUntil(me, b.completed_cycle, profile::k_async_barrier_stall_cycles);
    return;
  }
  all.wait_parity[me] = parity;
  b.waiters.push_back(me);
  block.WaitForWake(what, file, line);  // Complete acquires for the waiters it wakes
}

TL_SIM_OUTLINED_DEF void IssueLoad(uint32_t id, BarrierLoad&& load) {
  BlockRunner& block = CurrentBlock(load.what);
  Barriers& all = GetBarriers(block);
  Barrier& b = Use(block, id, load.what, load.file, load.line);
  if (g_thread.profile != nullptr)
    b.ready_cycle = std::max(b.ready_cycle, g_thread.profile->Transfer(load.thread, load.bytes, profile::SliceKind::kTmeLoad));
  b.load_bytes += load.bytes;
  b.loads.push_back(std::move(load));
  TryComplete(block, all, id, !b.waiters.empty());
}

}  // namespace async
}  // namespace tl_sim
#pragma GCC visibility pop
