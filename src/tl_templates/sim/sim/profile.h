/*!
 * \file tl_templates/sim/sim/profile.h
 * \brief Counters of a launch (TILELANG_SIM_PROFILE=1): what the kernel's memory accesses and matrix instructions
 *        would cost the hardware, counted exactly from the simulated execution.
 *
 * Every global and shared access of a generated kernel passes the sanitizer's hook (access_checks.h), which hands
 * it here with the accessing thread. Accesses that the threads of one warp make at the same place of the kernel
 * (buffer, source line, load or store) for the same time (each thread counts its executions of that place) are one
 * warp-level request, as on hardware where the warp issues the instruction once. At the end of each block:
 *   global: a request touches 32-byte sectors; sectors * 32 against the bytes asked for is the coalescing;
 *   shared: a request needs as many wavefronts as the most distinct 4-byte words it touches in one bank, at least
 *           its distinct words / banks ([I] the bank model: kSharedBanks banks of 4 bytes, see PERF_FACTS.md;
 *           a word read by several threads is one access, the broadcast);
 * so a bank conflict is a wavefront beyond that minimum. Matrix instructions, asynchronous copies and TME
 * transfers are counted where the device models issue them (sqmma.h, warp_mma.h, async_copy.h, tme.h); block
 * barriers once per barrier (builtins.h), async-barrier waits once per warp (async_barrier.h).
 *
 * TILELANG_SIM_PROFILE_BLOCKS=N runs N of the grid's blocks, evenly spaced, instead of all (counting only: the
 * other blocks' outputs are never written), for grids too large to simulate whole; `blocks` says how many ran and
 * `grid_blocks` how many the grid has.
 *
 * Accesses the generated code does not make itself (a template's loads through a pointer, atomics) are not
 * memory requests here; the templates' instructions are (SQMMA, MMA, LDLMS, TME).
 *
 * Each OS worker counts its blocks; the launch sums them, prints a table to stderr when profiling, and keeps
 * them for `tl_sim_last_profile()` (the JSON the Python profiler reads).
 */
#pragma once

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "config.h"

#pragma GCC visibility push(hidden)
namespace tl_sim {
namespace profile {

// [I] MUSA's shared-memory banks are not published for either arch (docs/PERF_FACTS.md section 1): 32 banks of
// 4 bytes, the layout the SQMMA swizzle atoms are consistent with, until a measurement says otherwise.
inline constexpr uint32_t kSharedBanks = 32;
inline constexpr uint32_t kBankBytes = 4;
inline constexpr uint32_t kSectorBytes = 32;  // [I] global transaction granularity (PERF_FACTS.md section 2)

#define TL_SIM_PROFILE_COUNTERS(X)                                                                  \
  X(global_load_requests) X(global_load_sectors) X(global_load_bytes)                               \
  X(global_store_requests) X(global_store_sectors) X(global_store_bytes)                            \
  X(shared_load_requests) X(shared_load_wavefronts) X(shared_load_ideal_wavefronts)                 \
  X(shared_store_requests) X(shared_store_wavefronts) X(shared_store_ideal_wavefronts)              \
  X(sqmma) X(sqmma_flops) X(warp_mma) X(warp_mma_flops) X(ldlms_bytes) X(tme_load_bytes)            \
  X(tme_store_bytes) X(block_barriers) X(async_barrier_waits) X(blocks)

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

struct Totals {
  uint64_t value[kNumCounters] = {};

  void Add(const Totals& other) {
    for (int i = 0; i < kNumCounters; ++i) value[i] += other.value[i];
  }
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

/*! \brief A worker's counters: its blocks' totals, and the block in progress's requests. */
class Recorder {
 public:
  void Access(uint32_t thread, bool shared, bool store, const void* address, uint32_t bytes, const char* name,
              int line) {
    const Site site{name, line, store, shared};
    uint32_t& executions = executions_[{thread, site}];
    std::vector<Span>& spans = requests_[RequestKey{site, thread / kWarpSize, executions}];
    ++executions;
    spans.push_back(Span{reinterpret_cast<uintptr_t>(address), bytes});
  }

  void Add(Counter counter, uint64_t amount) { totals_.value[counter] += amount; }

  /*! \brief The block ended: its requests become counts. */
  void FlushBlock() {
    for (auto& [key, spans] : requests_) {
      if (key.site.shared) {
        Shared(key.site.store, spans);
      } else {
        Global(key.site.store, spans);
      }
    }
    requests_.clear();
    executions_.clear();
    ++totals_.value[k_blocks];
  }

  const Totals& totals() const { return totals_; }

 private:
  struct Span {
    uintptr_t address;
    uint32_t bytes;
  };

  void Global(bool store, const std::vector<Span>& spans) {
    std::unordered_set<uintptr_t> sectors;
    uint64_t bytes = 0;
    for (const Span& s : spans) {
      bytes += s.bytes;
      for (uintptr_t a = s.address / kSectorBytes; a <= (s.address + s.bytes - 1) / kSectorBytes; ++a) sectors.insert(a);
    }
    totals_.value[store ? k_global_store_requests : k_global_load_requests] += 1;
    totals_.value[store ? k_global_store_sectors : k_global_load_sectors] += sectors.size();
    totals_.value[store ? k_global_store_bytes : k_global_load_bytes] += bytes;
  }

  void Shared(bool store, const std::vector<Span>& spans) {
    std::unordered_set<uintptr_t> words;
    for (const Span& s : spans)
      for (uintptr_t w = s.address / kBankBytes; w <= (s.address + s.bytes - 1) / kBankBytes; ++w) words.insert(w);
    uint64_t per_bank[kSharedBanks] = {};
    uint64_t worst = 0;
    for (uintptr_t w : words) worst = std::max(worst, ++per_bank[w % kSharedBanks]);
    totals_.value[store ? k_shared_store_requests : k_shared_load_requests] += 1;
    totals_.value[store ? k_shared_store_wavefronts : k_shared_load_wavefronts] += worst;
    totals_.value[store ? k_shared_store_ideal_wavefronts : k_shared_load_ideal_wavefronts] +=
        (words.size() + kSharedBanks - 1) / kSharedBanks;
  }

  Totals totals_;
  std::unordered_map<std::pair<uint32_t, Site>, uint32_t, ThreadSiteHash, ThreadSiteEq> executions_;
  std::unordered_map<RequestKey, std::vector<Span>, RequestHash> requests_;
};

/*! \brief The counters of the process's last profiled launch, as JSON (read by tl_sim_last_profile). */
struct LastLaunch {
  std::mutex mu;
  char json[4096] = "{}";
};

inline LastLaunch& GlobalLastLaunch() {
  static LastLaunch last;
  return last;
}

/*! \brief The launch's shape, reported with its counters. */
struct Geometry {
  uint64_t grid_blocks = 0;
  uint32_t threads_per_block = 0;
  uint64_t dynamic_smem_bytes = 0;
};

/*! \brief Keep `totals` of the launch of `kernel` as the last profile, and print them to stderr if `print`. */
inline void Publish(const char* kernel, const Geometry& shape, const Totals& totals, bool print) {
  LastLaunch& last = GlobalLastLaunch();
  std::lock_guard<std::mutex> lock(last.mu);
  int at = std::snprintf(last.json, sizeof(last.json),
                         "{\"kernel\": \"%s\", \"grid_blocks\": %llu, \"threads_per_block\": %u, "
                         "\"dynamic_smem_bytes\": %llu",
                         kernel, static_cast<unsigned long long>(shape.grid_blocks), shape.threads_per_block,
                         static_cast<unsigned long long>(shape.dynamic_smem_bytes));
  for (int i = 0; i < kNumCounters && at < static_cast<int>(sizeof(last.json)); ++i)
    at += std::snprintf(last.json + at, sizeof(last.json) - at, ", \"%s\": %llu", kCounterNames[i],
                        static_cast<unsigned long long>(totals.value[i]));
  if (at < static_cast<int>(sizeof(last.json))) std::snprintf(last.json + at, sizeof(last.json) - at, "}");
  if (!print) return;
  std::fprintf(stderr, "[tilelang sim profile] kernel %s (%s): %llu of %llu blocks, %u threads, %llu B smem\n",
               kernel, kArchName, static_cast<unsigned long long>(totals.value[k_blocks]),
               static_cast<unsigned long long>(shape.grid_blocks), shape.threads_per_block,
               static_cast<unsigned long long>(shape.dynamic_smem_bytes));
  for (int i = 0; i < kNumCounters; ++i)
    std::fprintf(stderr, "  %-30s %llu\n", kCounterNames[i], static_cast<unsigned long long>(totals.value[i]));
}

}  // namespace profile
}  // namespace tl_sim
#pragma GCC visibility pop

/*! \brief The JSON counters of the last launch profiled in this process (TILELANG_SIM_PROFILE=1), "{}" if none. */
extern "C" __attribute__((visibility("default"), used)) inline const char* tl_sim_last_profile() {
  return tl_sim::profile::GlobalLastLaunch().json;
}
