/*!
 * \file tl_templates/sim/sim/profile.h
 * \brief Counters of a launch (TILELANG_SIM_PROFILE=1): what the kernel's memory accesses and matrix instructions
 *        would cost the hardware, counted exactly from the simulated execution.
 *
 * Every global and shared access of a generated kernel passes the sanitizer's hook (access_checks.h), which hands
 * it here with the accessing thread. Accesses that the threads of one warp make at the same place of the kernel
 * (buffer, source line, load or store) for the same time (each thread counts its executions of that place) are one
 * warp-level request, as on hardware where the warp issues the instruction once. At the end of each block:
 *   global: a request touches 32-byte sectors; sectors * 32 against its distinct bytes (an address several lanes
 *           read counts once) is the coalescing;
 *   shared: a request needs as many wavefronts as the most distinct 4-byte words it touches in one bank, at least
 *           its distinct words / banks ([I] the bank model: kSharedBanks banks of 4 bytes, see PERF_FACTS.md;
 *           a word read by several threads is one access, the broadcast);
 * so a bank conflict is a wavefront beyond that minimum. Matrix instructions, asynchronous copies and TME
 * transfers are counted where the device models issue them (sqmma.h, warp_mma.h, async_copy.h, tme.h); block
 * barriers once per barrier (builtins.h), async-barrier waits once per warp (async_barrier.h), warp shuffles, votes
 * and matches once per warp instruction (scheduler.h MeetClocks: the generated code's and the reduction templates'
 * alike; the cycle model does not time them, profiler/model.py charges them).
 *
 * The same hooks drive a cycle model (Recorder, below; docs/PERF_MODEL.md): each block's critical path in
 * simulated cycles, the tensor pipe's busy cycles and the warps' stalls by kind, from per-MP figures the build
 * passes as -DTL_SIM_TIMING_* (tilelang_musa/profiler/arch_figures.py).
 *
 * TILELANG_SIM_PROFILE_BLOCKS=N runs N of the grid's blocks, evenly spaced, instead of all (counting only: the
 * other blocks' outputs are never written), for grids too large to simulate whole; `blocks` says how many ran and
 * `grid_blocks` how many the grid has.
 *
 * Accesses the generated code does not make itself (a template's loads through a pointer, atomics) are not
 * memory requests here; the templates' instructions are (SQMMA, MMA, LDLMS, TME).
 *
 * Each OS worker counts its blocks; the launch sums them, prints a table to stderr when profiling, and keeps
 * them for `tl_sim_last_profile()` (the JSON the Python profiler reads). TILELANG_SIM_PROFILE=3 counts as 2 does
 * and also records the cycle model's timeline (timeline.h); the counts are the same.
 */
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "config.h"
#include "timeline.h"
#include "vector_types.h"
#include "visibility.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {
namespace profile {

// [I] MUSA's shared-memory banks are not published for either arch (docs/PERF_FACTS.md section 1): 32 banks of
// 4 bytes, the layout the SQMMA swizzle atoms are consistent with, until a measurement says otherwise.
inline constexpr uint32_t kSharedBanks = 32;
inline constexpr uint32_t kBankBytes = 4;
inline constexpr uint32_t kSectorBytes = 32;  // [I] global transaction granularity (PERF_FACTS.md section 2)
// arithmetic_chain_units counts a warp's dependent chain of arithmetic in 1/kChainUnits of an instruction.
inline constexpr uint64_t kChainUnits = 65536;

#define TL_SIM_PROFILE_COUNTERS(X)                                                                  \
  X(global_load_requests) X(global_load_sectors) X(global_load_bytes)                               \
  X(global_store_requests) X(global_store_sectors) X(global_store_bytes)                            \
  X(shared_load_requests) X(shared_load_wavefronts) X(shared_load_ideal_wavefronts)                 \
  X(shared_store_requests) X(shared_store_wavefronts) X(shared_store_ideal_wavefronts)              \
  X(sqmma) X(sqmma_flops) X(warp_mma) X(warp_mma_flops) X(ldlms_bytes) X(tme_load_bytes)            \
  X(tme_store_bytes) X(arithmetic_instructions) X(arithmetic_chain_units) X(block_barriers)         \
  X(async_barrier_waits) X(blocks)                                                                  \
  X(warp_shuffles) X(block_cycles) X(block_cycles_max) X(tensor_cycles) X(barrier_stall_cycles)                      \
  X(async_barrier_stall_cycles) X(copy_wait_stall_cycles) X(mma_wait_stall_cycles)

enum Counter : int {
#define TL_SIM_PROFILE_ENUM(name) k_##name,
  TL_SIM_PROFILE_COUNTERS(TL_SIM_PROFILE_ENUM)
#undef TL_SIM_PROFILE_ENUM
  kNumCounters
};

inline constexpr const char* kCounterNames[kNumCounters] = {
#define TL_SIM_PROFILE_NAME(name) #name,
    TL_SIM_PROFILE_COUNTERS(TL_SIM_PROFILE_NAME)
#undef TL_SIM_PROFILE_NAME
};

/*! \brief A matrix instruction's kind and shape, as one key: SQMMA (squad) or warp MMA, m, n, k. */
inline uint64_t MmaShapeKey(bool squad, uint32_t m, uint32_t n, uint32_t k) {
  return (uint64_t{squad} << 48) | (uint64_t{m} << 32) | (uint64_t{n} << 16) | k;
}

struct Totals {
  uint64_t value[kNumCounters] = {};
  std::map<uint64_t, uint64_t> mma_shapes;  // MmaShapeKey -> instructions

  TL_SIM_OUTLINED void Add(const Totals& other) TL_SIM_OUTLINED_AS("profile_totals_add");
};

/*!
 * \brief The cycle model's figures, per MP of the arch, from the build (-DTL_SIM_TIMING_*, written by the Python
 *        profiler from tilelang_musa/profiler/arch_figures.py, where each figure's source is given). A build without
 *        them counts but does not time: every cycle counter stays 0.
 */
struct Timing {
  double tensor_flops_per_cycle[3];  // SQMMA, by operand width: 8-, 16-, 32-bit
  double warp_mma_flops_per_cycle;   // mp_22 warp MMA, mp_31 WMMA
  double global_latency;             // a global load's issue to its data
  double async_latency;              // an LDLMS / TME transfer's first byte
  double transfer_bytes_per_cycle;   // the MP's share of the memory system for async transfers
  double barrier_cycles;             // a block barrier, once the last thread arrives
};

#ifdef TL_SIM_TIMING_TENSOR16
inline constexpr bool kTimed = true;
inline constexpr Timing kTiming{{TL_SIM_TIMING_TENSOR8, TL_SIM_TIMING_TENSOR16, TL_SIM_TIMING_TENSOR32},
                                TL_SIM_TIMING_WARP_MMA,
                                TL_SIM_TIMING_GLOBAL_LATENCY,
                                TL_SIM_TIMING_ASYNC_LATENCY,
                                TL_SIM_TIMING_TRANSFER_BYTES,
                                TL_SIM_TIMING_BARRIER};
#else
inline constexpr bool kTimed = false;
inline constexpr Timing kTiming{{1, 1, 1}, 1, 0, 0, 1, 0};
#endif

/*! \brief How many launches of this library are being profiled now. Hooks on paths every simulation takes (a
 *         statement's arithmetic charge, access_checks.h) read this plain global first, so that launches without
 *         profiling pay one load there, not a thread-local lookup. */
#if defined(TL_SIM_SHARED_RUNTIME)
extern std::atomic<int> g_profiled_launches __asm__(TL_SIM_RT_SYMBOL("profiled_launches")) TL_SIM_RT_EXPORT;
#else
inline std::atomic<int> g_profiled_launches{0};
#endif

/*! \brief Counts a profiled launch in g_profiled_launches for its duration. */
class ProfiledLaunch {
 public:
  explicit ProfiledLaunch(bool profiled) : profiled_(profiled) {
    if (profiled_) g_profiled_launches.fetch_add(1, std::memory_order_relaxed);
  }
  ~ProfiledLaunch() {
    if (profiled_) g_profiled_launches.fetch_sub(1, std::memory_order_relaxed);
  }
  ProfiledLaunch(const ProfiledLaunch&) = delete;
  ProfiledLaunch& operator=(const ProfiledLaunch&) = delete;

 private:
  bool profiled_;
};

/*! \brief One place of the kernel where threads access memory: a buffer, a source line, a load or a store. */
struct Site {
  const char* name;
  int line;
  bool store;
  bool shared;
  bool operator==(const Site& o) const {
    return name == o.name && line == o.line && store == o.store && shared == o.shared;
  }
};

/*! \brief A warp-level request: the `instance`-th execution of `site` by the threads of `warp`. */
struct RequestKey {
  Site site;
  uint32_t warp;
  uint32_t instance;
  bool operator==(const RequestKey& o) const { return site == o.site && warp == o.warp && instance == o.instance; }
};

inline size_t Mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

struct SiteHash {
  size_t operator()(const Site& s) const {
    return Mix(Mix(reinterpret_cast<size_t>(s.name), static_cast<size_t>(s.line)), s.store * 2 + s.shared);
  }
};
struct ThreadSiteHash {
  size_t operator()(const std::pair<uint32_t, Site>& k) const { return Mix(SiteHash{}(k.second), k.first); }
};
struct ThreadSiteEq {
  bool operator()(const std::pair<uint32_t, Site>& a, const std::pair<uint32_t, Site>& b) const {
    return a.first == b.first && a.second == b.second;
  }
};
struct RequestHash {
  size_t operator()(const RequestKey& k) const { return Mix(Mix(SiteHash{}(k.site), k.warp), k.instance); }
};

/*!
 * \brief A worker's counters: its blocks' totals, the block in progress's requests, and its threads' clocks.
 *
 * The cycle model: each simulated thread has a clock. A memory access it makes advances it by one, and so does
 * each arithmetic instruction of its statements (counted by the code generator, `tl_sim::Compute(n, depth,
 * iterations)` in the sanitizer build); a global load's data is ready `global_latency` later, and the thread waits for its loads only
 * where it must (a barrier, an arrival, an MMA, its exit), as a compiler batches independent loads. Threads that
 * meet in a rendezvous leave it at the latest clock of them (plus `barrier_cycles` for a block barrier); what each
 * waited is a barrier stall. The block's tensor pipe runs one matrix instruction at a time (FLOPs / the arch's rate for the
 * operand width), and its async transfers (LDLMS, TME) share `transfer_bytes_per_cycle`, landing `async_latency`
 * after their last byte leaves; a thread that waits for a transfer, a barrier phase or an SQMMA group starts again
 * when that lands, and the wait is a stall of its kind. The block's cycles are its last thread's clock: the
 * critical path through its instructions, with the overlap its asynchrony allows. Stalls and arithmetic
 * instructions are counted per warp (its lane 0).
 */
class Recorder {
 public:
  /*! \brief Record the timeline of the blocks from now on into `timeline` (TILELANG_SIM_PROFILE=3). */
  void Trace(Timeline* timeline) { timeline_ = timeline; }

  /*! \brief Block `id` at `index`, of `threads` threads, starts: every clock at 0, the pipes idle. */
  TL_SIM_OUTLINED void StartBlock(uint32_t threads, uint64_t id, uint3 index) TL_SIM_OUTLINED_AS("profile_start_block");

  TL_SIM_OUTLINED void Access(uint32_t thread, bool shared, bool store, const void* address, uint32_t bytes,
                              const char* name, int line) TL_SIM_OUTLINED_AS("profile_access");

  void Add(Counter counter, uint64_t amount) { totals_.value[counter] += amount; }

  /*! \brief One matrix instruction of this kind and shape (sqmma.h per squad, warp_mma.h per warp). */
  TL_SIM_OUTLINED void AddMmaShape(bool squad, uint32_t m, uint32_t n, uint32_t k) TL_SIM_OUTLINED_AS("profile_add_mma_shape");

  /*! \brief Thread `thread` executes `instructions` arithmetic instructions: one cycle each; counted per warp, and
   *         so is their dependent chain: `depth` of them in sequence, shared by `iterations` that run side by side
   *         (in units of 1/kChainUnits of an instruction: dependence_depth.h). */
  void Compute(uint32_t thread, uint32_t instructions, uint32_t depth, uint64_t iterations) {
    if (thread < clocks_.size()) {
      double& cycle = clocks_[thread].cycle;
      if (timeline_ != nullptr && thread % kWarpSize == 0)
        timeline_->Add(thread / kWarpSize, SliceKind::kArithmetic, cycle, cycle + instructions, instructions);
      cycle += instructions;
    }
    if (thread % kWarpSize == 0) {
      totals_.value[k_arithmetic_instructions] += instructions;
      totals_.value[k_arithmetic_chain_units] += (uint64_t{depth} * kChainUnits + iterations / 2) / iterations;
    }
  }

  /*! \brief Thread `thread`'s clock once its outstanding global loads have arrived. */
  double Settle(uint32_t thread) {
    Clock& c = clocks_[thread];
    if (c.loads_ready > c.cycle) {
      if (timeline_ != nullptr && thread % kWarpSize == 0)
        timeline_->Add(thread / kWarpSize, SliceKind::kGlobalLoadWait, c.cycle, c.loads_ready);
      c.cycle = c.loads_ready;
    }
    return c.cycle;
  }

  /*! \brief Thread `thread` resumes no earlier than `at`; the wait counts as a stall of kind `stall` (a cycle
   *         counter, or kNumCounters for none) when the thread is lane 0 of its warp, and is a `slice` of the
   *         timeline (default: the stall's kind). */
  void WaitUntil(uint32_t thread, double at, Counter stall, SliceKind slice = SliceKind::kCollectiveWait) {
    const double now = Settle(thread);
    if (at <= now) return;
    if (stall != kNumCounters && thread % kWarpSize == 0) cycles_[stall] += at - now;
    if (timeline_ != nullptr && thread % kWarpSize == 0)
      timeline_->Add(thread / kWarpSize, stall == kNumCounters ? slice : SliceOfStall(stall), now, at);
    clocks_[thread].cycle = at;
  }

  /*! \brief A matrix instruction (`kind`: SQMMA or MMA issue) that `thread` issued now, done at `done`: a mark on
   *         its warp's track. */
  void MarkIssue(uint32_t thread, SliceKind kind, double done) {
    if (timeline_ == nullptr || thread % kWarpSize != 0) return;
    const double now = clocks_[thread].cycle;
    timeline_->Add(thread / kWarpSize, kind, now, now, 0, done);
  }

  /*! \brief An async transfer (`kind`: LDLMS, TME load or store) of `bytes` issued by `thread` now: the cycle its
   *         data lands. */
  double Transfer(uint32_t thread, uint64_t bytes, SliceKind kind) {
    const double length = static_cast<double>(bytes) / kTiming.transfer_bytes_per_cycle;
    const double start = PlaceTransfer(clocks_[thread].cycle, length);
    const double lands = start + length + kTiming.async_latency;
    if (timeline_ != nullptr) timeline_->Add(timeline_->transfer_track(), kind, start, start + length, bytes, lands);
    return lands;
  }

  /*! \brief The earliest cycle at or after `at` from which the block's transfer stream is idle for `length` cycles;
   *         that stretch is then taken. The simulator runs threads one after another, not in clock order, so a
   *         transfer can be issued at an earlier clock than one already placed: it takes the idle time before that
   *         one instead of queuing behind it (a single "next free" cycle chained every thread's copies behind the
   *         previous thread's, waits included: GDN prefill's per-thread LDLMS pieces, issue 40). Transfers issued
   *         in clock order are placed as before: each at its clock or when the one before it is done. */
  TL_SIM_OUTLINED double PlaceTransfer(double at, double length) TL_SIM_OUTLINED_AS("profile_place_transfer");

  /*! \brief A matrix instruction of `flops` issued at `at` (SQMMA on `bits`-wide operands, or a warp MMA when
   *         `bits` is 0): the cycle it completes, once the block's tensor pipe has run the ones before it. */
  double Tensor(double at, uint64_t flops, uint32_t bits) {
    const double rate = bits == 0    ? kTiming.warp_mma_flops_per_cycle
                        : bits <= 8  ? kTiming.tensor_flops_per_cycle[0]
                        : bits <= 16 ? kTiming.tensor_flops_per_cycle[1]
                                     : kTiming.tensor_flops_per_cycle[2];
    const double busy = static_cast<double>(flops) / rate;
    const double start = std::max(at, tensor_free_);
    tensor_free_ = start + busy;
    cycles_[k_tensor_cycles] += busy;
    if (timeline_ != nullptr)
      timeline_->Add(timeline_->tensor_track(), bits == 0 ? SliceKind::kMma : SliceKind::kSqmma, start, tensor_free_,
                     flops, tensor_free_);
    return tensor_free_;
  }

  /*! \brief The block ended: its requests become counts, its last clock its cycles. */
  TL_SIM_OUTLINED void FlushBlock() TL_SIM_OUTLINED_AS("profile_flush_block");

  const Totals& totals() const { return totals_; }

 private:
  struct Span {
    uintptr_t address;
    uint32_t bytes;
  };

  static SliceKind SliceOfStall(Counter stall) {
    switch (stall) {
      case k_barrier_stall_cycles: return SliceKind::kBarrierWait;
      case k_async_barrier_stall_cycles: return SliceKind::kAsyncBarrierWait;
      case k_copy_wait_stall_cycles: return SliceKind::kCopyWait;
      case k_mma_wait_stall_cycles: return SliceKind::kSqmmaWait;
      default: return SliceKind::kCollectiveWait;
    }
  }

  /*! \brief A warp's global request: its sectors, and its distinct bytes (lanes reading one address, a broadcast,
   *         ask for its bytes once, so bytes / (sectors * 32) is at most 1). */
  TL_SIM_OUTLINED void Global(bool store, std::vector<Span> spans) TL_SIM_OUTLINED_AS("profile_global");

  TL_SIM_OUTLINED void Shared(bool store, const std::vector<Span>& spans) TL_SIM_OUTLINED_AS("profile_shared");

  struct Clock {
    double cycle = 0;
    double loads_ready = 0;  // when the thread's global loads so far have all arrived
  };

  Totals totals_;
  std::vector<Clock> clocks_;  // by linear thread id in the block
  double tensor_free_ = 0, transfer_free_ = 0;  // when the block's tensor pipe and transfers are next free
  std::map<double, double> transfer_busy_;  // the transfer stream's busy stretches: start -> end, disjoint
  Timeline* timeline_ = nullptr;                // TILELANG_SIM_PROFILE=3: the slices of the worker's blocks
  double cycles_[kNumCounters] = {};            // the block's cycle counters, before rounding
  std::unordered_map<std::pair<uint32_t, Site>, uint32_t, ThreadSiteHash, ThreadSiteEq> executions_;
  std::unordered_map<RequestKey, std::vector<Span>, RequestHash> requests_;
};

/*! \brief The counters of the process's last profiled launch, as JSON (read by tl_sim_last_profile). */
struct LastLaunch {
  std::mutex mu;
  char json[8192] = "{}";
};

TL_SIM_OUTLINED LastLaunch& GlobalLastLaunch() TL_SIM_OUTLINED_AS("profile_last_launch");

/*! \brief The launch's shape, reported with its counters. */
struct Geometry {
  uint64_t grid_blocks = 0;
  uint32_t threads_per_block = 0;
  uint64_t dynamic_smem_bytes = 0;
};

/*! \brief Keep `totals` of the launch of `kernel` as the last profile, and print them to stderr if `print`. */
TL_SIM_OUTLINED void Publish(const char* kernel, const Geometry& shape, const Totals& totals, bool print)
    TL_SIM_OUTLINED_AS("profile_publish");

}  // namespace profile
}  // namespace tl_sim
#pragma GCC visibility pop

#if !defined(TL_SIM_LINK_RUNTIME)  // a linked kernel library calls the runtime's
#include "profile_outlined.h"
#endif

/*! \brief The JSON counters of the last launch profiled in this process (TILELANG_SIM_PROFILE=1), "{}" if none. */
#if !defined(TL_SIM_LINK_RUNTIME)  // a linked kernel library finds the runtime's
extern "C" __attribute__((visibility("default"), used)) inline const char* tl_sim_last_profile() {
  return tl_sim::profile::GlobalLastLaunch().json;
}
#endif
